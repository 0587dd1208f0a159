-- TPC-H Q3 (shipping priority) as an incremental grouped view: revenue of open orders of
-- one market segment, per order. SUM(l_extendedprice * (1 - l_discount)) reads lineitem
-- only, so it is a ring payload in the T-representation (EXPLAIN: "ring payload on atom l");
-- the group-by key o_orderkey is the join key of the q-hierarchical part of the join.
SELECT l.l_orderkey, SUM(l.l_extendedprice * (1 - l.l_discount)) AS revenue, o.o_orderdate, o.o_shippriority
FROM customer c
JOIN orders o ON c.c_custkey = o.o_custkey
JOIN lineitem l ON l.l_orderkey = o.o_orderkey
WHERE c.c_mktsegment = 'BUILDING'
  AND o.o_orderdate < DATE '2026-01-20'
  AND l.l_shipdate > DATE '2026-01-20'
GROUP BY l.l_orderkey, o.o_orderdate, o.o_shippriority
