-- TPC-H Q3-style shipping-priority lines with computed columns: each BUILDING-segment order's
-- unshipped lines with their discounted revenue and a CASE priority class. Computed columns are
-- evaluated on each changed join row (EXPLAIN: "computed columns"); the join stays free-connex.
SELECT o.o_orderkey, o.o_orderdate, o.o_shippriority,
       l.l_extendedprice * (1 - l.l_discount) AS revenue,
       CASE WHEN o.o_orderpriority IN ('1-URGENT', '2-HIGH') THEN 'high' ELSE 'low' END AS priority_class
FROM customer c
JOIN orders o ON c.c_custkey = o.o_custkey
JOIN lineitem l ON l.l_orderkey = o.o_orderkey
WHERE c.c_mktsegment = 'BUILDING'
  AND o.o_orderdate < DATE '2026-02-01'
  AND l.l_shipdate > DATE '2026-01-15'
