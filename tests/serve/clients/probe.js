// node-postgres against ivm serve: prints one JSON document of what it read.
const { Client } = require('pg');

async function main() {
  const url = process.argv[2];
  const c = new Client({ connectionString: url });
  await c.connect();
  const out = {};
  const views = ['acc_totals', 'big_trans'];
  for (const v of views) {
    out[v] = (await c.query({ text: `SELECT * FROM ${v}`, rowMode: 'array' })).rows;
  }
  const params = process.env.IVM_PARAM_VIEWS === '1';
  for (const acc of params ? [0, 7, 19, 21] : []) {
    // extended protocol, unnamed statement, text parameters
    out[`by_acc/${acc}`] = (await c.query({ text: 'SELECT * FROM by_acc WHERE acc = $1', values: [acc], rowMode: 'array' })).rows;
  }
  // a named prepared statement, executed several times
  const counts = [];
  for (const acc of [0, 7, 19, 21]) {
    const r = await c.query({ name: 'count_acc', text: 'SELECT n FROM acc_totals WHERE acc = $1', values: [acc] });
    counts.push(Number(r.rows[0].n));
  }
  out.counts = counts;
  await c.query('BEGIN');
  await c.query('INSERT INTO trans VALUES ($1, $2, $3, $4)', [424242, 7, '3.50', 'node']);
  out.inside = Number((await c.query('SELECT n FROM acc_totals WHERE acc = $1', [7])).rows[0].n);
  await c.query('ROLLBACK');
  out.after_rollback = Number((await c.query('SELECT n FROM acc_totals WHERE acc = $1', [7])).rows[0].n);
  try {
    await c.query('SELECT * FROM no_such_view');
  } catch (e) {
    out.error = e.code;
  }
  out.version = (await c.query('SELECT version()')).rows[0].version;
  await c.end();
  console.log(JSON.stringify(out));
}
main().catch((e) => { console.error(e); process.exit(1); });
