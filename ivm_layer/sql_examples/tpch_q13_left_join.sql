-- TPC-H Q13-style customers and their orders, customers without (non-urgent) orders kept
-- with NULLs: the LEFT JOIN is the inner join UNION ALL the customers with NOT EXISTS a matching
-- order (per-key order counts; a customer's padded row appears or leaves when its count
-- crosses zero). tpch_q13.sql groups it, as Q13 does.
SELECT c.c_custkey, c.c_name, o.o_orderkey,
       CASE WHEN o.o_orderkey IS NULL THEN 'no orders' ELSE o.o_orderstatus END AS status
FROM customer c
LEFT JOIN orders o ON c.c_custkey = o.o_custkey AND o.o_orderpriority <> '1-URGENT'
