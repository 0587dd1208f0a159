-- Q7: a free-connex projection of Q4 (drops R.c and T.i).
SELECT R.a, R.b, S.d, S.e, S.f, T.g, T.h FROM R, S, T WHERE R.a < S.d AND S.d < T.g
