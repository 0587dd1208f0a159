-- Q8: a free-connex projection of Q5.
SELECT R.a, S.d, S.e, S.f, T.g, T.h, S.k FROM R, S, T WHERE R.a < S.d AND S.d < T.g AND R.k = S.k
