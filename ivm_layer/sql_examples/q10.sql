-- Q10: a projection of Q4 that is acyclic but NOT free-connex: the projected result is
-- materialized and maintained from delta enumeration (EXPLAIN says so).
SELECT R.b, R.c, S.e, S.f, T.h, T.i FROM R, S, T WHERE R.a < S.d AND S.d < T.g
