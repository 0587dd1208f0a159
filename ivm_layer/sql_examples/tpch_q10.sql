-- TPC-H Q10 (returned item reporting): revenue lost to returned items per customer in one
-- quarter, with the customer's nation. Grouped by the customer key (and attributes that
-- depend on it); the revenue sum is a ring payload on lineitem.
SELECT c.c_custkey, c.c_name, SUM(l.l_extendedprice * (1 - l.l_discount)) AS revenue, n.n_name
FROM customer c, orders o, lineitem l, nation n
WHERE c.c_custkey = o.o_custkey
  AND l.l_orderkey = o.o_orderkey
  AND o.o_orderdate >= DATE '2026-01-10'
  AND o.o_orderdate < DATE '2026-02-10'
  AND l.l_returnflag = 'R'
  AND c.c_nationkey = n.n_nationkey
GROUP BY c.c_custkey, c.c_name, n.n_name
