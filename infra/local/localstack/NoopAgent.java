package infinity;

/**
 * A Java agent that does nothing. LocalStack starts DynamoDB Local with a `-javaagent` that
 * patches it to allow more than 20 global secondary indexes; Infinity's table has none, and that
 * agent is fetched from the network, so install.sh builds this one in its place.
 */
public final class NoopAgent {
    private NoopAgent() {}

    public static void premain(String args) {}
}
