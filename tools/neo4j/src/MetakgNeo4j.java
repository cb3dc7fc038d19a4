import java.nio.file.Path;
import java.util.List;
import java.util.Map;
import org.neo4j.configuration.GraphDatabaseSettings;
import org.neo4j.configuration.connectors.BoltConnector;
import org.neo4j.configuration.helpers.SocketAddress;
import org.neo4j.dbms.api.DatabaseManagementService;
import org.neo4j.dbms.api.DatabaseManagementServiceBuilder;

/**
 * A Neo4j Community server with only the Bolt connector, on 127.0.0.1, for tests and local work. With a
 * plugin folder (the fourth argument), the procedures of the jars in it are served: the launcher puts APOC
 * core there, so tools such as neo4j-graphrag's get_schema (apoc.meta.*) work against it. Authentication is
 * off, unless the environment variable METAKG_NEO4J_PASSWORD holds a password: then it is on, and the user
 * neo4j has that password (taken from the environment, never from the command line, which others can read).
 */
public class MetakgNeo4j {
    public static void main(String[] args) throws Exception {
        if (args.length < 2) {
            System.err.println("usage: MetakgNeo4j HOME_DIR BOLT_PORT [PAGECACHE_MB [PLUGIN_DIR]]");
            System.exit(2);
        }
        Path home = Path.of(args[0]);
        String password = System.getenv("METAKG_NEO4J_PASSWORD");
        boolean auth = password != null && !password.isEmpty();
        int port = Integer.parseInt(args[1]);
        long pagecache = args.length > 2 ? Long.parseLong(args[2]) : 512;
        DatabaseManagementServiceBuilder builder = new DatabaseManagementServiceBuilder(home)
            .setConfig(BoltConnector.enabled, true)
            .setConfig(BoltConnector.listen_address, new SocketAddress("127.0.0.1", port))
            .setConfig(GraphDatabaseSettings.auth_enabled, auth)
            .setConfig(GraphDatabaseSettings.pagecache_memory, pagecache * 1024 * 1024);
        if (args.length > 3) {
            builder = builder
                .setConfig(GraphDatabaseSettings.plugin_dir, Path.of(args[3]).toAbsolutePath())
                .setConfig(GraphDatabaseSettings.procedure_unrestricted, List.of("apoc.*"));
        }
        DatabaseManagementService dbms = builder.build();
        Runtime.getRuntime().addShutdownHook(new Thread(dbms::shutdown));
        if (auth) {
            dbms.database("system").executeTransactionally(
                "ALTER USER neo4j SET PASSWORD $password CHANGE NOT REQUIRED", Map.of("password", password));
        }
        System.out.println("READY bolt://127.0.0.1:" + port);
        System.out.flush();
        Thread.currentThread().join();
    }
}
