-- Q12: the non-free-connex projection of Q6.
SELECT R.b, R.c, S.e, S.f, T.h, T.i FROM R, S, T WHERE R.a < S.d AND S.d < T.g AND S.k = T.k
