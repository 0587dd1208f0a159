-- Credit-card fraud pattern (paper 000 §1): two small purchases followed, within one hour
-- of the first, by a large one on the same account.
-- The three timestamp comparisons close a cycle, so the planner materializes a core of two
-- atoms (bounded by the implied one-hour window) and maintains the rest as a T-representation.
SELECT *
FROM trans S1, trans S2, trans L
WHERE S1.ts < S2.ts AND S2.ts < L.ts AND L.ts < S1.ts + 3600
  AND S1.acc = S2.acc AND S2.acc = L.acc
  AND S1.amnt < 100 AND S2.amnt < 100
  AND L.amnt > 400
