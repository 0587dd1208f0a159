-- Q2: an inequality join within equal keys, R ⋈ S | a < d, R.k = S.k.
SELECT * FROM R, S WHERE R.a < S.d AND R.k = S.k
