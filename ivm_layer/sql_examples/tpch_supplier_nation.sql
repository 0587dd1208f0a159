-- TPC-H style: suppliers and customers of the same nation in a given region
-- (a 4-way equi-join through nation; acyclic, free-connex).
SELECT n.n_name, s.s_suppkey, s.s_name, c.c_custkey, c.c_name
FROM region r
JOIN nation n ON n.n_regionkey = r.r_regionkey
JOIN supplier s ON s.s_nationkey = n.n_nationkey
JOIN customer c ON c.c_nationkey = n.n_nationkey
WHERE r.r_name = 'EUROPE'
