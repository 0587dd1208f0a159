-- Q1 (paper 000, Table 1): a pure inequality join, R ⋈ S | a < d. Output is quadratic;
-- the T-representation stays linear and enumerates it with constant delay.
SELECT * FROM R, S WHERE R.a < S.d
