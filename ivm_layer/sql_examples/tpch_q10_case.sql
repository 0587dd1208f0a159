-- TPC-H Q10-style returned-item report: revenue per customer and nation, plus a CASE-counted
-- number of returned lines (an aggregate argument of any shape rides on the T-representation
-- as a ring payload when one table's columns decide it).
SELECT c.c_custkey, c.c_name, n.n_name,
       SUM(l.l_extendedprice * (1 - l.l_discount)) AS revenue,
       SUM(CASE WHEN l.l_returnflag = 'R' THEN 1 ELSE 0 END) AS returned_lines,
       COUNT(*) AS lines
FROM customer c
JOIN orders o ON c.c_custkey = o.o_custkey
JOIN lineitem l ON l.l_orderkey = o.o_orderkey
JOIN nation n ON c.c_nationkey = n.n_nationkey
WHERE o.o_orderdate >= DATE '2026-01-01' AND o.o_orderdate < DATE '2026-02-15'
GROUP BY c.c_custkey, c.c_name, n.n_name
