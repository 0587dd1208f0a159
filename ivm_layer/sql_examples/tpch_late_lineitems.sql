-- TPC-H style: line items received after their commit date, shipped within a
-- 30-day window of the order date (equi-join plus inequalities with interval offsets).
SELECT o.o_orderkey, o.o_orderdate, l.l_linenumber, l.l_shipdate, l.l_receiptdate
FROM orders o JOIN lineitem l ON l.l_orderkey = o.o_orderkey
WHERE l.l_receiptdate > l.l_commitdate
  AND l.l_shipdate BETWEEN o.o_orderdate AND o.o_orderdate + INTERVAL 30 DAY
