// The PostgreSQL JDBC driver against ivm serve: prints one JSON-ish line per check.
import java.sql.*;
import java.util.*;

public class Probe {
    static String rows(ResultSet rs) throws SQLException {
        StringBuilder sb = new StringBuilder("[");
        int n = rs.getMetaData().getColumnCount();
        boolean first = true;
        while (rs.next()) {
            if (!first) sb.append(",");
            first = false;
            sb.append("[");
            for (int i = 1; i <= n; i++) {
                if (i > 1) sb.append(",");
                String s = rs.getString(i);
                sb.append(s == null ? "null" : "\"" + s.replace("\\", "\\\\").replace("\"", "\\\"") + "\"");
            }
            sb.append("]");
        }
        return sb.append("]").toString();
    }

    public static void main(String[] args) throws Exception {
        Properties p = new Properties();
        p.setProperty("user", "ivm");
        try (Connection c = DriverManager.getConnection(args[0], p)) {
            StringBuilder out = new StringBuilder("{");
            for (String v : new String[]{"acc_totals", "big_trans"}) {
                try (Statement st = c.createStatement(); ResultSet rs = st.executeQuery("SELECT * FROM " + v)) {
                    out.append("\"").append(v).append("\":").append(rows(rs)).append(",");
                }
            }
            // more executions than prepareThreshold (5): the driver switches to a named statement
            boolean params = args.length > 1 && args[1].equals("params");
            if (params) try (PreparedStatement ps = c.prepareStatement("SELECT * FROM by_acc WHERE acc = ?")) {
                for (int round = 0; round < 3; round++) {
                    for (int acc : new int[]{0, 7, 19, 21}) {
                        ps.setInt(1, acc);
                        try (ResultSet rs = ps.executeQuery()) {
                            String r = rows(rs);
                            if (round == 2) out.append("\"by_acc/").append(acc).append("\":").append(r).append(",");
                        }
                    }
                }
            }
            c.setAutoCommit(false);
            try (PreparedStatement ins = c.prepareStatement("INSERT INTO trans VALUES (?, ?, ?, ?)")) {
                ins.setLong(1, 515151L);
                ins.setInt(2, 19);
                ins.setBigDecimal(3, new java.math.BigDecimal("8.25"));
                ins.setString(4, "jdbc");
                ins.executeUpdate();
            }
            try (PreparedStatement q = c.prepareStatement("SELECT n FROM acc_totals WHERE acc = ?")) {
                q.setInt(1, 19);
                try (ResultSet rs = q.executeQuery()) { rs.next(); out.append("\"inside\":").append(rs.getLong(1)).append(","); }
            }
            c.rollback();
            c.setAutoCommit(true);
            DatabaseMetaData md = c.getMetaData();
            List<String> names = new ArrayList<>();
            try (ResultSet rs = md.getTables(null, null, "%", new String[]{"TABLE", "VIEW"})) {
                while (rs.next()) names.add(rs.getString("TABLE_NAME"));
            }
            Collections.sort(names);
            out.append("\"tables\":\"").append(String.join(",", names)).append("\",");
            List<String> cols = new ArrayList<>();
            try (ResultSet rs = md.getColumns(null, null, "acc_totals", "%")) {
                while (rs.next()) cols.add(rs.getString("COLUMN_NAME") + ":" + rs.getString("TYPE_NAME"));
            }
            out.append("\"columns\":\"").append(String.join(",", cols)).append("\",");
            try (Statement st = c.createStatement()) {
                st.executeQuery("SELECT * FROM no_such_view");
            } catch (SQLException e) {
                out.append("\"error\":\"").append(e.getSQLState()).append("\",");
            }
            out.append("\"product\":\"").append(md.getDatabaseProductName()).append(" ").append(md.getDatabaseProductVersion()).append("\"}");
            System.out.println(out);
        }
    }
}
