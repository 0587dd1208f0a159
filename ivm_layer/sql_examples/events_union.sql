-- One activity feed from two event sources: UNION ALL of two views (each branch maintained on
-- its own; per row the engine keeps its count in each branch), with computed columns.
SELECT c.user_id, c.ts, 'click' AS kind, c.page AS detail
FROM clicks c
UNION ALL
SELECT p.user_id, p.ts, 'purchase' AS kind, CAST(p.amount AS VARCHAR) AS detail
FROM purchases p
WHERE p.amount > 0
