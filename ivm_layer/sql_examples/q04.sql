-- Q4: an inequality chain a < d < g over three relations (cubic output, linear state).
SELECT * FROM R, S, T WHERE R.a < S.d AND S.d < T.g
