-- TPC-H style: open orders of building-segment customers with their line items
-- (a 3-way equi-join on keys; q-hierarchical pieces, constant-delay enumeration).
SELECT c.c_custkey, c.c_name, o.o_orderkey, o.o_orderdate, l.l_linenumber, l.l_quantity
FROM customer c
JOIN orders o ON o.o_custkey = c.c_custkey
JOIN lineitem l ON l.l_orderkey = o.o_orderkey
WHERE c.c_mktsegment = 'BUILDING' AND o.o_orderstatus = 'O'
