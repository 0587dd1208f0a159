-- TPC-H Q12-style line counts by order status: high/low priority lines counted with CASE over
-- late lines (commit < receipt, ship < commit: filters between two columns of one table).
SELECT o.o_orderstatus,
       SUM(CASE WHEN o.o_orderpriority = '1-URGENT' OR o.o_orderpriority = '2-HIGH' THEN 1 ELSE 0 END) AS high_line_count,
       SUM(CASE WHEN o.o_orderpriority <> '1-URGENT' AND o.o_orderpriority <> '2-HIGH' THEN 1 ELSE 0 END) AS low_line_count
FROM orders o
JOIN lineitem l ON o.o_orderkey = l.l_orderkey
WHERE l.l_commitdate < l.l_receiptdate AND l.l_shipdate < l.l_commitdate
GROUP BY o.o_orderstatus
