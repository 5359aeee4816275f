package infinity;

import java.lang.reflect.Field;
import org.eclipse.jetty.server.Connector;
import org.eclipse.jetty.server.Server;
import org.eclipse.jetty.server.ServerConnector;
import software.amazon.dynamodb.services.local.main.ServerRunner;
import software.amazon.dynamodb.services.local.server.DynamoDBProxyServer;

/**
 * Starts DynamoDB Local listening on 127.0.0.1 only. DynamoDB Local has no option to choose its
 * address: its Jetty server is made with a port alone, so it listens on every interface and
 * anyone who can reach the machine can read and write its tables.
 *
 * <p>This takes DynamoDB Local's own command line, builds its server as its main class does,
 * sets the host of the server's connector before it starts, and starts it. Telemetry is never
 * set up here, so none is sent whatever the flags say.
 *
 * <p>The server's Jetty instance is a private field of DynamoDBProxyServer; a DynamoDB Local
 * that renames it fails here with a message saying so, rather than listening everywhere.
 * infra/local/install.sh builds this against the pinned jar; emulators.sh runs it for the
 * standalone DynamoDB Local, and LocalStack runs it as its DynamoDB Local (see install.sh).
 */
public final class LoopbackDynamoDB {
    private static final String HOST = "127.0.0.1";

    private LoopbackDynamoDB() {}

    public static void main(String[] args) throws Exception {
        DynamoDBProxyServer proxy = ServerRunner.createServerFromCommandLineArgs(args);
        Server jetty = jettyOf(proxy);
        int bound = 0;
        for (Connector connector : jetty.getConnectors()) {
            if (!(connector instanceof ServerConnector)) {
                throw new IllegalStateException(
                        "DynamoDB Local's server has a connector of another kind ("
                                + connector.getClass().getName()
                                + "), which cannot be bound to " + HOST);
            }
            ((ServerConnector) connector).setHost(HOST);
            bound++;
        }
        if (bound == 0) {
            throw new IllegalStateException("DynamoDB Local's server has no connector to bind to " + HOST);
        }
        proxy.start();
    }

    private static Server jettyOf(DynamoDBProxyServer proxy) throws IllegalAccessException {
        Field field;
        try {
            field = DynamoDBProxyServer.class.getDeclaredField("server");
        } catch (NoSuchFieldException e) {
            throw new IllegalStateException(
                    "this DynamoDB Local keeps its Jetty server in no field named `server`;"
                            + " LoopbackDynamoDB cannot bind it to " + HOST
                            + " (infra/local/dynamodb/LoopbackDynamoDB.java)",
                    e);
        }
        field.setAccessible(true);
        return (Server) field.get(proxy);
    }
}
