import java.nio.file.Path;
import org.neo4j.configuration.GraphDatabaseSettings;
import org.neo4j.configuration.connectors.BoltConnector;
import org.neo4j.configuration.helpers.SocketAddress;
import org.neo4j.dbms.api.DatabaseManagementService;
import org.neo4j.dbms.api.DatabaseManagementServiceBuilder;

/** A Neo4j Community server with only the Bolt connector, on 127.0.0.1, for tests and local work. */
public class MetakgNeo4j {
    public static void main(String[] args) throws Exception {
        if (args.length < 2) {
            System.err.println("usage: MetakgNeo4j HOME_DIR BOLT_PORT [PAGECACHE_MB]");
            System.exit(2);
        }
        Path home = Path.of(args[0]);
        int port = Integer.parseInt(args[1]);
        long pagecache = args.length > 2 ? Long.parseLong(args[2]) : 512;
        DatabaseManagementService dbms = new DatabaseManagementServiceBuilder(home)
            .setConfig(BoltConnector.enabled, true)
            .setConfig(BoltConnector.listen_address, new SocketAddress("127.0.0.1", port))
            .setConfig(GraphDatabaseSettings.auth_enabled, false)
            .setConfig(GraphDatabaseSettings.pagecache_memory, pagecache * 1024 * 1024)
            .build();
        Runtime.getRuntime().addShutdownHook(new Thread(dbms::shutdown));
        System.out.println("READY bolt://127.0.0.1:" + port);
        System.out.flush();
        Thread.currentThread().join();
    }
}
