-- TPC-H Q13 (customer distribution): how many customers have 0, 1, 2, … orders that are not
-- urgent. The inner GROUP BY over the LEFT JOIN is a nested view (the join, itself the inner
-- join UNION ALL the customers without a matching order, feeds a grouped view); its change
-- stream feeds the outer GROUP BY over the per-customer counts.
SELECT c_count, COUNT(*) AS custdist
FROM (
    SELECT c.c_custkey, COUNT(o.o_orderkey) AS c_count
    FROM customer c
    LEFT JOIN orders o ON c.c_custkey = o.o_custkey AND o.o_orderpriority <> '1-URGENT'
    GROUP BY c.c_custkey
) AS c_orders
GROUP BY c_count
