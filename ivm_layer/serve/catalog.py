"""The ``pg_catalog`` that clients probe, emulated for a DuckDB database with incremental views.

psql's ``\\d``/``\\dt``/``\\dv``/``\\d v``/``\\l``/``\\dn`` and tab completion, SQLAlchemy's and
pandas' reflection, psycopg's type lookups and BI tools send PostgreSQL catalog queries
(captured from psql 15 and SQLAlchemy 2 against a real PostgreSQL 15 with
``log_statement=all``). DuckDB's own ``pg_catalog`` answers only some of them, so catalog
queries run on a small in-memory DuckDB database of their own (:class:`CatalogDB`) whose
``main`` schema holds tables named like PostgreSQL's (``pg_class``, ``pg_attribute``,
``pg_type``, ``pg_namespace`` …, with PostgreSQL's column names) and macros for the functions
those queries call (``format_type``, ``pg_get_userbyid``, ``pg_table_is_visible``,
``pg_get_viewdef`` …). A statement is sent there when it names a catalog table or
``information_schema``; :func:`rewrite` drops the ``pg_catalog.`` qualifiers and turns the
few PostgreSQL spellings DuckDB does not take (``OPERATOR(pg_catalog.~)``, ``COLLATE
pg_catalog.default``, ``::regclass``, ``json_build_object``) into DuckDB's.

The tables are filled from the served database (DuckDB's ``duckdb_tables()``/``duckdb_views()``/
``duckdb_columns()``/constraints, DuckDB's ``main`` shown as PostgreSQL's ``public``) plus the
incremental views, which appear as views (``relkind 'v'``, their definition as the view
definition) or, MATERIALIZED, as materialized views (``'m'``). They are rebuilt when a
statement may have changed the schema (O(schema), a few ms), never per query.
"""

from __future__ import annotations

import re
import threading
import zlib
from collections.abc import Iterable
from dataclasses import dataclass, field

from . import pgtypes, sqlscan

PG_CATALOG_NS, PUBLIC_NS, INFO_NS = 11, 2200, 13000


@dataclass
class Relation:
    """One relation as the catalog shows it."""

    name: str
    kind: str                       # r table, v view, m materialized view
    schema: str = "public"
    columns: list[tuple[str, str, bool, str | None]] = field(default_factory=list)
    # (name, DuckDB type, not null, default expression)
    definition: str | None = None   # views: the SELECT
    oid: int | None = None
    comment: str | None = None
    keys: list[tuple[str, str, list[str]]] = field(default_factory=list)   # (kind p/u, name, columns)


def synthetic_oid(name: str) -> int:
    """A stable OID for a relation DuckDB does not number (served views): 2**30 + crc32."""
    return (1 << 30) + (zlib.crc32(name.encode()) & 0x3FFFFFFF)


_TABLES = """
CREATE TABLE pg_namespace (oid BIGINT, nspname VARCHAR, nspowner BIGINT, nspacl VARCHAR);
CREATE TABLE pg_class (oid BIGINT, relname VARCHAR, relnamespace BIGINT, reltype BIGINT, reloftype BIGINT,
  relowner BIGINT, relam BIGINT, relfilenode BIGINT, reltablespace BIGINT, relpages INTEGER, reltuples FLOAT,
  relallvisible INTEGER, reltoastrelid BIGINT, relhasindex BOOLEAN, relisshared BOOLEAN, relpersistence VARCHAR,
  relkind VARCHAR, relnatts SMALLINT, relchecks SMALLINT, relhasrules BOOLEAN, relhastriggers BOOLEAN,
  relhassubclass BOOLEAN, relrowsecurity BOOLEAN, relforcerowsecurity BOOLEAN, relispopulated BOOLEAN,
  relreplident VARCHAR, relispartition BOOLEAN, relrewrite BIGINT, relfrozenxid BIGINT, relminmxid BIGINT,
  relacl VARCHAR[], reloptions VARCHAR[], relpartbound VARCHAR, ivm_viewdef VARCHAR, ivm_comment VARCHAR);
CREATE TABLE pg_attribute (attrelid BIGINT, attname VARCHAR, atttypid BIGINT, attstattarget INTEGER,
  attlen SMALLINT, attnum SMALLINT, attndims INTEGER, attcacheoff INTEGER, atttypmod INTEGER, attbyval BOOLEAN,
  attalign VARCHAR, attstorage VARCHAR, attcompression VARCHAR, attnotnull BOOLEAN, atthasdef BOOLEAN,
  atthasmissing BOOLEAN, attidentity VARCHAR, attgenerated VARCHAR, attisdropped BOOLEAN, attislocal BOOLEAN,
  attinhcount INTEGER, attcollation BIGINT, attacl VARCHAR[], attoptions VARCHAR[], attfdwoptions VARCHAR[],
  attmissingval VARCHAR);
CREATE TABLE pg_attrdef (oid BIGINT, adrelid BIGINT, adnum SMALLINT, adbin VARCHAR);
CREATE TABLE pg_type (oid BIGINT, typname VARCHAR, typnamespace BIGINT, typowner BIGINT, typlen SMALLINT,
  typbyval BOOLEAN, typtype VARCHAR, typcategory VARCHAR, typispreferred BOOLEAN, typisdefined BOOLEAN,
  typdelim VARCHAR, typrelid BIGINT, typsubscript VARCHAR, typelem BIGINT, typarray BIGINT, typinput VARCHAR,
  typoutput VARCHAR, typreceive VARCHAR, typsend VARCHAR, typmodin VARCHAR, typmodout VARCHAR,
  typanalyze VARCHAR, typalign VARCHAR, typstorage VARCHAR, typnotnull BOOLEAN, typbasetype BIGINT,
  typtypmod INTEGER, typndims INTEGER, typcollation BIGINT, typdefaultbin VARCHAR, typdefault VARCHAR,
  typacl VARCHAR[], ivm_sqlname VARCHAR);
CREATE TABLE pg_database (oid BIGINT, datname VARCHAR, datdba BIGINT, encoding INTEGER, datlocprovider VARCHAR,
  datistemplate BOOLEAN, datallowconn BOOLEAN, datconnlimit INTEGER, datfrozenxid BIGINT, datminmxid BIGINT,
  dattablespace BIGINT, datcollate VARCHAR, datctype VARCHAR, daticulocale VARCHAR, daticurules VARCHAR,
  datcollversion VARCHAR, datacl VARCHAR[]);
CREATE TABLE pg_roles (rolname VARCHAR, rolsuper BOOLEAN, rolinherit BOOLEAN, rolcreaterole BOOLEAN,
  rolcreatedb BOOLEAN, rolcanlogin BOOLEAN, rolreplication BOOLEAN, rolconnlimit INTEGER, rolpassword VARCHAR,
  rolvaliduntil TIMESTAMP, rolbypassrls BOOLEAN, rolconfig VARCHAR[], oid BIGINT);
CREATE TABLE pg_constraint (oid BIGINT, conname VARCHAR, connamespace BIGINT, contype VARCHAR,
  condeferrable BOOLEAN, condeferred BOOLEAN, convalidated BOOLEAN, conrelid BIGINT, contypid BIGINT,
  conindid BIGINT, conparentid BIGINT, confrelid BIGINT, confupdtype VARCHAR, confdeltype VARCHAR,
  confmatchtype VARCHAR, conislocal BOOLEAN, coninhcount INTEGER, connoinherit BOOLEAN, conkey SMALLINT[],
  confkey SMALLINT[], conpfeqop BIGINT[], conppeqop BIGINT[], conffeqop BIGINT[], confdelsetcols SMALLINT[],
  conexclop BIGINT[], conbin VARCHAR, ivm_def VARCHAR);
CREATE TABLE pg_index (indexrelid BIGINT, indrelid BIGINT, indnatts SMALLINT, indnkeyatts SMALLINT,
  indisunique BOOLEAN, indnullsnotdistinct BOOLEAN, indisprimary BOOLEAN, indisexclusion BOOLEAN,
  indimmediate BOOLEAN, indisclustered BOOLEAN, indisvalid BOOLEAN, indcheckxmin BOOLEAN, indisready BOOLEAN,
  indislive BOOLEAN, indisreplident BOOLEAN, indkey SMALLINT[], indcollation BIGINT[], indclass BIGINT[],
  indoption SMALLINT[], indexprs VARCHAR, indpred VARCHAR);
CREATE TABLE pg_description (objoid BIGINT, classoid BIGINT, objsubid INTEGER, description VARCHAR);
CREATE TABLE pg_am (oid BIGINT, amname VARCHAR, amhandler VARCHAR, amtype VARCHAR);
CREATE TABLE pg_collation (oid BIGINT, collname VARCHAR, collnamespace BIGINT, collowner BIGINT,
  collprovider VARCHAR, collisdeterministic BOOLEAN, collencoding INTEGER, collcollate VARCHAR, collctype VARCHAR);
CREATE TABLE pg_settings (name VARCHAR, setting VARCHAR, unit VARCHAR, category VARCHAR, short_desc VARCHAR,
  extra_desc VARCHAR, context VARCHAR, vartype VARCHAR, source VARCHAR, min_val VARCHAR, max_val VARCHAR,
  enumvals VARCHAR[], boot_val VARCHAR, reset_val VARCHAR, sourcefile VARCHAR, sourceline INTEGER,
  pending_restart BOOLEAN);
CREATE TABLE pg_tablespace (oid BIGINT, spcname VARCHAR, spcowner BIGINT, spcacl VARCHAR[], spcoptions VARCHAR[]);
CREATE TABLE pg_proc (oid BIGINT, proname VARCHAR, pronamespace BIGINT, proowner BIGINT, prolang BIGINT,
  prokind VARCHAR, prorettype BIGINT, proargtypes VARCHAR, proretset BOOLEAN, proisstrict BOOLEAN);
CREATE TABLE pg_policy (oid BIGINT, polname VARCHAR, polrelid BIGINT, polcmd VARCHAR, polpermissive BOOLEAN,
  polroles BIGINT[], polqual VARCHAR, polwithcheck VARCHAR);
CREATE TABLE pg_statistic_ext (oid BIGINT, stxrelid BIGINT, stxname VARCHAR, stxnamespace BIGINT,
  stxowner BIGINT, stxstattarget INTEGER, stxkeys SMALLINT[], stxkind VARCHAR[], stxexprs VARCHAR);
CREATE TABLE pg_publication (oid BIGINT, pubname VARCHAR, pubowner BIGINT, puballtables BOOLEAN,
  pubinsert BOOLEAN, pubupdate BOOLEAN, pubdelete BOOLEAN, pubtruncate BOOLEAN, pubviaroot BOOLEAN);
CREATE TABLE pg_publication_namespace (oid BIGINT, pnpubid BIGINT, pnnspid BIGINT);
CREATE TABLE pg_publication_rel (oid BIGINT, prpubid BIGINT, prrelid BIGINT, prqual VARCHAR, prattrs SMALLINT[]);
CREATE TABLE pg_inherits (inhrelid BIGINT, inhparent BIGINT, inhseqno INTEGER, inhdetachpending BOOLEAN);
CREATE TABLE pg_rewrite (oid BIGINT, rulename VARCHAR, ev_class BIGINT, ev_type VARCHAR, ev_enabled VARCHAR,
  is_instead BOOLEAN, ev_qual VARCHAR, ev_action VARCHAR);
CREATE TABLE pg_trigger (oid BIGINT, tgrelid BIGINT, tgparentid BIGINT, tgname VARCHAR, tgfoid BIGINT,
  tgtype SMALLINT, tgenabled VARCHAR, tgisinternal BOOLEAN, tgconstrrelid BIGINT, tgconstrindid BIGINT,
  tgconstraint BIGINT, tgdeferrable BOOLEAN, tginitdeferred BOOLEAN, tgnargs SMALLINT, tgattr SMALLINT[],
  tgargs VARCHAR, tgqual VARCHAR, tgoldtable VARCHAR, tgnewtable VARCHAR);
CREATE TABLE pg_sequence (seqrelid BIGINT, seqtypid BIGINT, seqstart BIGINT, seqincrement BIGINT,
  seqmax BIGINT, seqmin BIGINT, seqcache BIGINT, seqcycle BOOLEAN);
CREATE TABLE pg_extension (oid BIGINT, extname VARCHAR, extowner BIGINT, extnamespace BIGINT,
  extrelocatable BOOLEAN, extversion VARCHAR, extconfig BIGINT[], extcondition VARCHAR[]);
CREATE TABLE pg_enum (oid BIGINT, enumtypid BIGINT, enumsortorder FLOAT, enumlabel VARCHAR);
CREATE TABLE pg_depend (classid BIGINT, objid BIGINT, objsubid INTEGER, refclassid BIGINT, refobjid BIGINT,
  refobjsubid INTEGER, deptype VARCHAR);
CREATE TABLE pg_foreign_table (ftrelid BIGINT, ftserver BIGINT, ftoptions VARCHAR[]);
CREATE TABLE pg_partitioned_table (partrelid BIGINT, partstrat VARCHAR, partnatts SMALLINT,
  partdefid BIGINT, partattrs SMALLINT[], partclass BIGINT[], partcollation BIGINT[], partexprs VARCHAR);
CREATE TABLE pg_event_trigger (oid BIGINT, evtname VARCHAR, evtevent VARCHAR, evtowner BIGINT, evtfoid BIGINT,
  evtenabled VARCHAR, evttags VARCHAR[]);
CREATE TABLE pg_range (rngtypid BIGINT, rngsubtype BIGINT, rngmultitypid BIGINT, rngcollation BIGINT,
  rngsubopc BIGINT, rngcanonical VARCHAR, rngsubdiff VARCHAR);
CREATE TABLE pg_language (oid BIGINT, lanname VARCHAR, lanowner BIGINT, lanispl BOOLEAN, lanpltrusted BOOLEAN);
CREATE TABLE pg_opclass (oid BIGINT, opcmethod BIGINT, opcname VARCHAR, opcnamespace BIGINT, opcowner BIGINT,
  opcfamily BIGINT, opcintype BIGINT, opcdefault BOOLEAN, opckeytype BIGINT);
CREATE TABLE pg_stat_activity (datid BIGINT, datname VARCHAR, pid INTEGER, usename VARCHAR,
  application_name VARCHAR, client_addr VARCHAR, state VARCHAR, query VARCHAR);
CREATE TABLE pg_foreign_server (oid BIGINT, srvname VARCHAR, srvowner BIGINT, srvfdw BIGINT);
CREATE TABLE pg_foreign_data_wrapper (oid BIGINT, fdwname VARCHAR, fdwowner BIGINT);
CREATE TABLE pg_conversion (oid BIGINT, conname VARCHAR, connamespace BIGINT);
CREATE TABLE pg_cast (oid BIGINT, castsource BIGINT, casttarget BIGINT, castfunc BIGINT, castcontext VARCHAR,
  castmethod VARCHAR);
CREATE TABLE pg_operator (oid BIGINT, oprname VARCHAR, oprnamespace BIGINT, oprleft BIGINT, oprright BIGINT,
  oprresult BIGINT);
CREATE TABLE pg_aggregate (aggfnoid BIGINT, aggkind VARCHAR);
CREATE TABLE pg_auth_members (roleid BIGINT, member BIGINT, grantor BIGINT, admin_option BOOLEAN);
CREATE TABLE pg_shdescription (objoid BIGINT, classoid BIGINT, description VARCHAR);
CREATE TABLE pg_matviews (schemaname VARCHAR, matviewname VARCHAR, matviewowner VARCHAR,
  tablespace VARCHAR, hasindexes BOOLEAN, ispopulated BOOLEAN, definition VARCHAR);
CREATE TABLE pg_timezone_names (name VARCHAR, abbrev VARCHAR, utc_offset INTERVAL, is_dst BOOLEAN);
CREATE TABLE information_schema_tables (table_catalog VARCHAR, table_schema VARCHAR, table_name VARCHAR,
  table_type VARCHAR, self_referencing_column_name VARCHAR, reference_generation VARCHAR,
  user_defined_type_catalog VARCHAR, user_defined_type_schema VARCHAR, user_defined_type_name VARCHAR,
  is_insertable_into VARCHAR, is_typed VARCHAR, commit_action VARCHAR);
CREATE TABLE information_schema_columns (table_catalog VARCHAR, table_schema VARCHAR, table_name VARCHAR,
  column_name VARCHAR, ordinal_position INTEGER, column_default VARCHAR, is_nullable VARCHAR,
  data_type VARCHAR, character_maximum_length INTEGER, numeric_precision INTEGER, numeric_scale INTEGER,
  datetime_precision INTEGER, udt_catalog VARCHAR, udt_schema VARCHAR, udt_name VARCHAR, is_identity VARCHAR,
  is_generated VARCHAR, is_updatable VARCHAR);
CREATE TABLE information_schema_views (table_catalog VARCHAR, table_schema VARCHAR, table_name VARCHAR,
  view_definition VARCHAR, check_option VARCHAR, is_updatable VARCHAR, is_insertable_into VARCHAR);
CREATE TABLE information_schema_schemata (catalog_name VARCHAR, schema_name VARCHAR, schema_owner VARCHAR,
  default_character_set_catalog VARCHAR, default_character_set_schema VARCHAR, default_character_set_name VARCHAR,
  sql_path VARCHAR);
CREATE VIEW pg_user AS SELECT rolname AS usename, oid AS usesysid, rolcreatedb AS usecreatedb,
  rolsuper AS usesuper, rolreplication AS userepl, rolbypassrls AS usebypassrls, '********' AS passwd,
  rolvaliduntil AS valuntil, rolconfig AS useconfig FROM pg_roles;
CREATE VIEW pg_authid AS SELECT oid, rolname, rolsuper, rolinherit, rolcreaterole, rolcreatedb, rolcanlogin,
  rolreplication, rolbypassrls, rolconnlimit, NULL::VARCHAR AS rolpassword, rolvaliduntil FROM pg_roles;
CREATE VIEW pg_tables AS SELECT n.nspname AS schemaname, c.relname AS tablename, 'ivm' AS tableowner,
  NULL::VARCHAR AS tablespace, false AS hasindexes, false AS hasrules, false AS hastriggers,
  false AS rowsecurity FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace WHERE c.relkind IN ('r', 'p');
CREATE VIEW pg_views AS SELECT n.nspname AS schemaname, c.relname AS viewname, 'ivm' AS viewowner,
  c.ivm_viewdef AS definition FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace WHERE c.relkind = 'v';
CREATE VIEW pg_indexes AS SELECT NULL::VARCHAR AS schemaname, NULL::VARCHAR AS tablename,
  NULL::VARCHAR AS indexname, NULL::VARCHAR AS tablespace, NULL::VARCHAR AS indexdef WHERE false;
"""

_MACROS = """
CREATE MACRO pg_get_userbyid(x) AS 'ivm';
CREATE MACRO pg_table_is_visible(x) AS coalesce((SELECT __m0.relnamespace IN (2200, 11) FROM pg_class __m0 WHERE __m0.oid = x), false);
CREATE MACRO pg_type_is_visible(x) AS true;
CREATE MACRO pg_function_is_visible(x) AS true;
CREATE MACRO pg_collation_is_visible(x) AS true;
CREATE MACRO pg_is_other_temp_schema(x) AS false;
CREATE MACRO pg_my_temp_schema() AS 0;
CREATE MACRO pg_relation_is_publishable(x) AS false;
CREATE MACRO pg_encoding_to_char(x) AS 'UTF8';
CREATE MACRO pg_char_to_encoding(x) AS 6;
CREATE MACRO pg_get_expr(e, r) AS e;
CREATE MACRO pg_get_expr(e, r, p) AS e;
CREATE MACRO pg_get_viewdef(x) AS (SELECT __m1.ivm_viewdef FROM pg_class __m1 WHERE __m1.oid = TRY_CAST(x AS BIGINT) OR __m1.relname = x::VARCHAR LIMIT 1);
CREATE MACRO pg_get_viewdef(x, p) AS (SELECT __m2.ivm_viewdef FROM pg_class __m2 WHERE __m2.oid = TRY_CAST(x AS BIGINT) OR __m2.relname = x::VARCHAR LIMIT 1);
CREATE MACRO pg_get_indexdef(x) AS NULL::VARCHAR;
CREATE MACRO pg_get_indexdef(x, c, p) AS NULL::VARCHAR;
CREATE MACRO pg_get_constraintdef(x) AS (SELECT __m3.ivm_def FROM pg_constraint __m3 WHERE __m3.oid = x);
CREATE MACRO pg_get_constraintdef(x, p) AS (SELECT __m4.ivm_def FROM pg_constraint __m4 WHERE __m4.oid = x);
CREATE MACRO pg_get_ruledef(x) AS NULL::VARCHAR;
CREATE MACRO pg_get_ruledef(x, p) AS NULL::VARCHAR;
CREATE MACRO pg_get_triggerdef(x) AS NULL::VARCHAR;
CREATE MACRO pg_get_triggerdef(x, p) AS NULL::VARCHAR;
CREATE MACRO pg_get_functiondef(x) AS NULL::VARCHAR;
CREATE MACRO pg_get_function_arguments(x) AS '';
CREATE MACRO pg_get_function_result(x) AS '';
CREATE MACRO pg_get_statisticsobjdef_columns(x) AS NULL::VARCHAR;
CREATE MACRO pg_get_serial_sequence(t, c) AS NULL::VARCHAR;
CREATE MACRO pg_get_partkeydef(x) AS NULL::VARCHAR;
CREATE MACRO pg_get_keywords() AS TABLE SELECT NULL::VARCHAR AS word, NULL::VARCHAR AS catcode,
  NULL::VARCHAR AS catdesc WHERE false;
CREATE MACRO obj_description(o) AS (SELECT __m5.ivm_comment FROM pg_class __m5 WHERE __m5.oid = o);
CREATE MACRO obj_description(o, c) AS (SELECT __m6.ivm_comment FROM pg_class __m6 WHERE __m6.oid = o);
CREATE MACRO col_description(o, n) AS NULL::VARCHAR;
CREATE MACRO shobj_description(o, c) AS NULL::VARCHAR;
CREATE MACRO has_table_privilege(a, b) AS true;
CREATE MACRO has_table_privilege(a, b, c) AS true;
CREATE MACRO has_schema_privilege(a, b) AS true;
CREATE MACRO has_schema_privilege(a, b, c) AS true;
CREATE MACRO has_database_privilege(a, b) AS true;
CREATE MACRO has_database_privilege(a, b, c) AS true;
CREATE MACRO has_column_privilege(a, b, c) AS true;
CREATE MACRO has_any_column_privilege(a, b) AS true;
CREATE MACRO pg_has_role(a, b) AS true;
CREATE MACRO pg_has_role(a, b, c) AS true;
CREATE MACRO format_type(t, m) AS CASE WHEN t IS NULL THEN NULL ELSE
  coalesce((SELECT __m7.ivm_sqlname FROM pg_type __m7 WHERE __m7.oid = t), '???')
  || CASE WHEN t = 1700 AND m >= 4 THEN '(' || ((m - 4) // 65536) || ',' || ((m - 4) % 65536) || ')'
          WHEN t IN (1042, 1043) AND m >= 4 THEN '(' || (m - 4) || ')' ELSE '' END END;
CREATE MACRO to_regtype(x) AS (SELECT __m8.oid FROM pg_type __m8 WHERE __m8.typname = x OR __m8.ivm_sqlname = x LIMIT 1);
CREATE MACRO to_regclass(x) AS (SELECT __m9.oid FROM pg_class __m9 WHERE __m9.relname = x OR 'public.' || __m9.relname = x LIMIT 1);
CREATE MACRO to_regnamespace(x) AS (SELECT __m10.oid FROM pg_namespace __m10 WHERE __m10.nspname = x LIMIT 1);
CREATE MACRO ivm_regclass_name(x) AS coalesce((SELECT __m11.relname FROM pg_class __m11 WHERE __m11.oid = TRY_CAST(x AS BIGINT)), x::VARCHAR);
CREATE MACRO ivm_regclass_oid(x) AS (SELECT __m12.oid FROM pg_class __m12 WHERE __m12.relname = x OR 'public.' || __m12.relname = x LIMIT 1);
CREATE MACRO ivm_regtype(x) AS coalesce((SELECT __m13.ivm_sqlname FROM pg_type __m13 WHERE __m13.oid = TRY_CAST(x AS BIGINT)), x::VARCHAR);
CREATE MACRO ivm_regnamespace(x) AS coalesce((SELECT __m14.nspname FROM pg_namespace __m14 WHERE __m14.oid = TRY_CAST(x AS BIGINT)), x::VARCHAR);
CREATE MACRO array_upper(a, d) AS len(a);
CREATE MACRO array_lower(a, d) AS CASE WHEN len(a) > 0 THEN 1 END;
CREATE MACRO array_length(a, d) AS len(a);
CREATE MACRO quote_ident(x) AS CASE WHEN regexp_full_match(x, '[a-z_][a-z0-9_$]*') THEN x
  ELSE '"' || replace(x, '"', '""') || '"' END;
CREATE MACRO pg_size_pretty(x) AS x || ' bytes';
CREATE MACRO pg_total_relation_size(x) AS 0;
CREATE MACRO pg_relation_size(x) AS 0;
CREATE MACRO pg_table_size(x) AS 0;
CREATE MACRO pg_indexes_size(x) AS 0;
CREATE MACRO pg_database_size(x) AS 0;
CREATE MACRO pg_tablespace_location(x) AS '';
CREATE MACRO txid_current() AS 1;
CREATE MACRO pg_is_in_recovery() AS false;
CREATE MACRO pg_postmaster_start_time() AS now();
CREATE MACRO current_setting(x) AS NULL::VARCHAR;
CREATE MACRO pg_get_function_identity_arguments(x) AS '';
CREATE MACRO ivm_version() AS '{version}';
CREATE MACRO ivm_current_schema() AS 'public';
"""

#: the catalog tables queries may name (unqualified in DuckDB: our main schema wins)
NAMES = sorted(set(re.findall(r"CREATE (?:TABLE|VIEW) (pg_\w+)", _TABLES)))
_CATALOG_REF = re.compile(r"\b(?:pg_catalog\s*\.|information_schema\s*\.|(?:" + "|".join(NAMES) + r")\b)", re.IGNORECASE)
_QUALIFIER = re.compile(r"\bpg_catalog\s*\.\s*", re.IGNORECASE)
_OPERATOR = re.compile(r"OPERATOR\s*\(\s*(?:pg_catalog\s*\.\s*)?([~!<>=*+\-/|&%^@#]+)\s*\)", re.IGNORECASE)
_COLLATE = re.compile(r'\s+COLLATE\s+(?:pg_catalog\s*\.\s*)?(?:"default"|default|"C"|"POSIX")', re.IGNORECASE)
_INFO = re.compile(r"\binformation_schema\s*\.\s*(\w+)", re.IGNORECASE)
_REG_LITERAL = re.compile(r"('(?:[^']|'')*')\s*::\s*(?:pg_catalog\s*\.\s*)?regclass\b", re.IGNORECASE)
_REG_CAST = re.compile(r"((?:\w+\.)*\w+|\))\s*::\s*(?:pg_catalog\s*\.\s*)?(regclass|regtype|regnamespace|regproc|regprocedure|regoper)\b", re.IGNORECASE)
_REG_AS = re.compile(r"\bAS\s+(?:pg_catalog\s*\.\s*)?(?:REGCLASS|REGTYPE|REGPROC|REGNAMESPACE)\s*\)", re.IGNORECASE)
_CHAR_CAST = re.compile(r'::\s*(?:pg_catalog\s*\.\s*)?"char"', re.IGNORECASE)
_OID_CAST = re.compile(r"::\s*(?:pg_catalog\s*\.\s*)?(oid|name|regconfig|xid|int2vector|oidvector)\b(\[\])?", re.IGNORECASE)
_ARRAY_LITERAL = re.compile(r"'\{([^'{}]*)\}'")
_JSON_OBJ = re.compile(r"\bjson_build_object\s*\(", re.IGNORECASE)


def is_catalog_query(text: str) -> bool:
    """Whether ``text`` names a catalog table or ``information_schema`` (outside literals)."""
    return _CATALOG_REF.search(text) is not None and _CATALOG_REF.search(sqlscan.code_only(text)) is not None


def _array_literal(m) -> str:
    items = [x.strip() for x in m.group(1).split(",") if x.strip()]
    return "[" + ", ".join(x if re.fullmatch(r"-?\d+", x) else "'" + x.strip('"').replace("'", "''") + "'"
                           for x in items) + "]"


def rewrite(text: str) -> str:
    """A PostgreSQL catalog query in the spelling :class:`CatalogDB` runs."""
    text = _ARRAY_LITERAL.sub(_array_literal, text)
    text = _REG_LITERAL.sub(lambda m: f"ivm_regclass_oid({m.group(1)})"
                            if not m.group(1)[1:-1].isdigit() else m.group(1), text)

    def code(piece: str) -> str:
        piece = _OPERATOR.sub(lambda m: m.group(1), piece)
        piece = _COLLATE.sub("", piece)
        piece = _REG_AS.sub("AS VARCHAR)", piece)
        piece = _CHAR_CAST.sub("::VARCHAR", piece)
        piece = _INFO.sub(lambda m: f"information_schema_{m.group(1).lower()}", piece)
        piece = _JSON_OBJ.sub("json_object(", piece)
        piece = _QUALIFIER.sub("", piece)
        piece = _OID_CAST.sub(lambda m: "::BIGINT" + (m.group(2) or "") if m.group(1).lower() in ("oid", "xid")
                              else "::VARCHAR" + (m.group(2) or ""), piece)
        return piece
    text = sqlscan.map_code(text, code)

    def reg(piece: str) -> str:
        def one(m):
            fn = {"regclass": "ivm_regclass_name", "regtype": "ivm_regtype",
                  "regnamespace": "ivm_regnamespace"}.get(m.group(2).lower())
            if fn is None:
                return m.group(1) + "::VARCHAR"
            if m.group(1) == ")":
                return m.group(0).split("::")[0] + "::VARCHAR"
            return f"{fn}({m.group(1)})"
        return _REG_CAST.sub(one, piece)
    return sqlscan.map_code(text, reg)


def _macro_statements() -> list[str]:
    """``_MACROS`` with the overloads of one name joined into one statement (DuckDB wants
    ``CREATE MACRO f(a) AS …, (a, b) AS …``)."""
    groups: dict[str, list[str]] = {}
    for stmt in filter(None, (s.strip() for s in _MACROS.split(";\n"))):
        m = re.match(r"CREATE MACRO (\w+)(\(.*)", stmt, re.DOTALL)
        groups.setdefault(m.group(1), []).append(m.group(2).rstrip(";"))
    return [f"CREATE MACRO {name}" + ", ".join(bodies) for name, bodies in groups.items()]


def _sql(v) -> str:
    if v is None:
        return "NULL"
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, (int, float)):
        return repr(v)
    return "'" + str(v).replace("'", "''") + "'"


class CatalogDB:
    """The emulated catalog: an in-memory DuckDB database of its own."""

    def __init__(self, version: str, user: str = "ivm"):
        import duckdb

        self.conn = duckdb.connect(":memory:")
        for stmt in filter(None, (s.strip() for s in _TABLES.split(";\n"))):
            self.conn.execute(stmt)
        for stmt in _macro_statements():
            self.conn.execute(stmt.replace("{version}", version.replace("'", "''")))
        self._static(user)
        self.lock = threading.Lock()
        self.version = -1

    def cursor(self):
        return self.conn.cursor()

    def _static(self, user: str) -> None:
        c = self.conn
        rows = []
        for oid, (name, typlen) in sorted(pgtypes.TYPES.items()):
            elem = pgtypes.ELEMENT_OF.get(oid, 0)
            arr = pgtypes.ARRAY_OF.get(oid, 0)
            cat = ("A" if elem else "B" if oid == pgtypes.BOOL else
                   "N" if oid in (20, 21, 23, 700, 701, 1700, 26) else
                   "D" if oid in (1082, 1083, 1114, 1184, 1266) else "T" if oid == 1186 else
                   "U" if oid in (17, 2950, 114, 3802) else "S")
            rows.append((oid, name, PG_CATALOG_NS, 10, typlen, typlen in (1, 2, 4, 8), "b", cat, False, True,
                         ",", 0, None, elem, arr, name + "in", name + "out", name + "recv", name + "send",
                         None, None, None, "i", "p", False, 0, -1, 0, 100 if oid in (25, 1043, 1042, 19) else 0,
                         None, None, None, pgtypes.format_type(oid)))
        c.executemany("INSERT INTO pg_type VALUES (" + ", ".join(["?"] * 33) + ")", rows)
        c.execute("INSERT INTO pg_am VALUES (2, 'heap', 'heap_tableam_handler', 't'), "
                  "(403, 'btree', 'bthandler', 'i'), (405, 'hash', 'hashhandler', 'i')")
        c.execute("INSERT INTO pg_collation VALUES (100, 'default', 11, 10, 'd', true, -1, NULL, NULL), "
                  "(950, 'C', 11, 10, 'c', true, -1, 'C', 'C'), (951, 'POSIX', 11, 10, 'c', true, -1, 'POSIX', 'POSIX')")
        c.execute("INSERT INTO pg_tablespace VALUES (1663, 'pg_default', 10, NULL, NULL), "
                  "(1664, 'pg_global', 10, NULL, NULL)")
        c.execute("INSERT INTO pg_language VALUES (12, 'internal', 10, false, false), (14, 'sql', 10, false, true)")

    def refresh(self, version: int, database: str, relations: Iterable[Relation], schemas: Iterable[tuple[int, str]],
                users: Iterable[str], settings: Iterable[tuple[str, str]]) -> None:
        """Replace the schema-dependent tables (under :attr:`lock`)."""
        c = self.conn
        c.execute("BEGIN")
        try:
            for t in ("pg_namespace", "pg_class", "pg_attribute", "pg_attrdef", "pg_constraint", "pg_database",
                      "pg_roles", "pg_settings", "pg_description", "pg_matviews", "information_schema_tables",
                      "information_schema_columns", "information_schema_views", "information_schema_schemata"):
                c.execute(f"DELETE FROM {t}")
            ns = [(PG_CATALOG_NS, "pg_catalog"), (PUBLIC_NS, "public"), (INFO_NS, "information_schema")]
            ns += [(oid, name) for oid, name in schemas if name not in ("pg_catalog", "public", "information_schema")]
            ns_oid = {name: oid for oid, name in ns}
            c.executemany("INSERT INTO pg_namespace VALUES (?, ?, 10, NULL)", ns)
            c.executemany("INSERT INTO information_schema_schemata VALUES (?, ?, 'ivm', NULL, NULL, 'UTF8', NULL)",
                          [(database, name) for _, name in ns])
            classes, attrs, defs, cons, isc, isv, ist = [], [], [], [], [], [], []
            for rel in relations:
                oid = rel.oid if rel.oid is not None else synthetic_oid(rel.schema + "." + rel.name)
                nsp = ns_oid.get(rel.schema, PUBLIC_NS)
                classes.append((oid, rel.name, nsp, 0, 0, 10, 2 if rel.kind in ("r", "m") else 0, oid, 0, 0, -1.0,
                                0, 0, bool(rel.keys), False, "p", rel.kind, len(rel.columns), 0,
                                rel.kind == "v", False, False, False, False, True, "d", False, 0, 0, 0, None, None,
                                None, rel.definition, rel.comment))
                ist.append((database, rel.schema, rel.name,
                            {"r": "BASE TABLE", "v": "VIEW", "m": "VIEW"}[rel.kind], None, None, None, None, None,
                            "YES" if rel.kind == "r" else "NO", "NO", None))
                if rel.kind in ("v", "m") and rel.definition is not None:
                    isv.append((database, rel.schema, rel.name, rel.definition, "NONE", "NO", "NO"))
                for i, (col, duck_type, notnull, default) in enumerate(rel.columns, 1):
                    toid, typlen, typmod = pgtypes.pg_type(duck_type)
                    attrs.append((oid, col, toid, -1, typlen, i, 1 if toid in pgtypes.ELEMENT_OF else 0, -1, typmod,
                                  typlen in (1, 2, 4, 8), "i", "p", "", bool(notnull), default is not None, False,
                                  "", "", False, True, 0, 100 if toid in (25, 1043) else 0, None, None, None, None))
                    if default is not None:
                        defs.append((oid * 1000 + i, oid, i, default))
                    fmt = pgtypes.format_type(toid, typmod)
                    isc.append((database, rel.schema, rel.name, col, i, default, "NO" if notnull else "YES",
                                "ARRAY" if toid in pgtypes.ELEMENT_OF else fmt.split("(")[0],
                                typmod - 4 if toid in (1042, 1043) and typmod >= 4 else None,
                                ((typmod - 4) >> 16) if toid == 1700 and typmod >= 4 else None,
                                ((typmod - 4) & 0xFFFF) if toid == 1700 and typmod >= 4 else None,
                                None, database, "pg_catalog", pgtypes.TYPES.get(toid, ("text",))[0], "NO", "NEVER",
                                "YES" if rel.kind == "r" else "NO"))
                for j, (kind, name, cols) in enumerate(rel.keys):
                    nums = [n for n, (col, *_rest) in enumerate(rel.columns, 1) if col in cols]
                    cdef = ("PRIMARY KEY (" if kind == "p" else "UNIQUE (") + ", ".join(cols) + ")"
                    cons.append((oid * 100 + j + 1, name, nsp, kind, False, False, True, oid, 0, 0, 0, 0, " ", " ",
                                 " ", True, 0, True, nums, None, None, None, None, None, None, None, cdef))
                if rel.kind == "m":
                    c.execute("INSERT INTO pg_matviews VALUES (?, ?, 'ivm', NULL, false, true, ?)",
                              [rel.schema, rel.name, rel.definition])
            if classes:
                c.executemany("INSERT INTO pg_class VALUES (" + ", ".join(["?"] * 35) + ")", classes)
            if attrs:
                c.executemany("INSERT INTO pg_attribute VALUES (" + ", ".join(["?"] * 26) + ")", attrs)
            if defs:
                c.executemany("INSERT INTO pg_attrdef VALUES (?, ?, ?, ?)", defs)
            if cons:
                c.executemany("INSERT INTO pg_constraint VALUES (" + ", ".join(["?"] * 27) + ")", cons)
            if ist:
                c.executemany("INSERT INTO information_schema_tables VALUES (" + ", ".join(["?"] * 12) + ")", ist)
            if isc:
                c.executemany("INSERT INTO information_schema_columns VALUES (" + ", ".join(["?"] * 18) + ")", isc)
            if isv:
                c.executemany("INSERT INTO information_schema_views VALUES (?, ?, ?, ?, ?, ?, ?)", isv)
            c.execute("INSERT INTO pg_database VALUES (16384, ?, 10, 6, 'c', false, true, -1, 0, 0, 1663, 'C', 'C', "
                      "NULL, NULL, NULL, NULL)", [database])
            c.executemany("INSERT INTO pg_roles VALUES (?, true, true, true, true, true, false, -1, '********', "
                          "NULL, false, NULL, ?)", [(u, 10 + i) for i, u in enumerate(sorted(set(users)))])
            c.executemany("INSERT INTO pg_settings (name, setting, context, vartype, source) VALUES "
                          "(?, ?, 'user', 'string', 'default')", list(settings))
            c.execute("COMMIT")
        except BaseException:
            c.execute("ROLLBACK")
            raise
        self.version = version
