-- Q9: a free-connex projection of Q6.
SELECT S.d, S.e, S.f, T.g, T.h, S.k FROM R, S, T WHERE R.a < S.d AND S.d < T.g AND S.k = T.k
