-- Q6: the chain of Q4 with an equality between S and T.
SELECT * FROM R, S, T WHERE R.a < S.d AND S.d < T.g AND S.k = T.k
