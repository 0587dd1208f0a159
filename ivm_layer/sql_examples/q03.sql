-- Q3: two inequalities on different attributes, a < d and e < g.
SELECT * FROM R, S, T WHERE R.a < S.d AND S.e < T.g
