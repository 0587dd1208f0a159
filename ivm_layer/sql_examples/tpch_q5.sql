-- TPC-H Q5-style (local supplier volume): revenue per supplier nation of one region in one
-- month, over a 6-way join. The real Q5 also requires c_nationkey = s_nationkey, which closes
-- the cycle customer–orders–lineitem–supplier: that query is cyclic and compile_view rejects it
-- with CyclicQueryError naming the atoms, so this variant drops the customer's nation.
SELECT n.n_name, SUM(l.l_extendedprice * (1 - l.l_discount)) AS revenue, COUNT(*) AS lines
FROM customer c, orders o, lineitem l, supplier s, nation n, region r
WHERE c.c_custkey = o.o_custkey
  AND l.l_orderkey = o.o_orderkey
  AND l.l_suppkey = s.s_suppkey
  AND s.s_nationkey = n.n_nationkey
  AND n.n_regionkey = r.r_regionkey
  AND r.r_name = 'EUROPE'
  AND o.o_orderdate >= DATE '2026-01-01'
  AND o.o_orderdate < DATE '2026-02-01'
GROUP BY n.n_name
