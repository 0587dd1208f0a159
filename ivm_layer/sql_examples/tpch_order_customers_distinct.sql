-- TPC-H style: the distinct (nation, segment) pairs of customers with urgent orders
-- (DISTINCT: set semantics; the per-row counts are materialized, EXPLAIN says so).
SELECT DISTINCT c.c_nationkey, c.c_mktsegment
FROM customer c JOIN orders o ON o.o_custkey = c.c_custkey
WHERE o.o_orderpriority IN ('1-URGENT', '2-HIGH')
