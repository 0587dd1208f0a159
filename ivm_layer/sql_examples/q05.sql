-- Q5: the chain of Q4 with an equality between R and S.
SELECT * FROM R, S, T WHERE R.a < S.d AND S.d < T.g AND R.k = S.k
