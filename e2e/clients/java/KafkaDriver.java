import java.io.BufferedWriter;
import java.io.IOException;
import java.io.InputStream;
import java.lang.management.ManagementFactory;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.Paths;
import java.nio.file.StandardOpenOption;
import java.time.Duration;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.HashSet;
import java.util.List;
import java.util.Map;
import java.util.Properties;
import java.util.Set;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicBoolean;
import java.util.concurrent.atomic.AtomicReference;

import org.apache.kafka.clients.CommonClientConfigs;
import org.apache.kafka.clients.admin.Admin;
import org.apache.kafka.clients.admin.NewTopic;
import org.apache.kafka.clients.admin.TopicDescription;
import org.apache.kafka.clients.consumer.CloseOptions;
import org.apache.kafka.clients.consumer.CommitFailedException;
import org.apache.kafka.clients.consumer.ConsumerConfig;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.ConsumerRecords;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerConfig;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.common.config.SaslConfigs;
import org.apache.kafka.common.config.SslConfigs;
import org.apache.kafka.common.errors.RebalanceInProgressException;
import org.apache.kafka.common.errors.UnknownTopicOrPartitionException;
import org.apache.kafka.common.serialization.StringDeserializer;
import org.apache.kafka.common.serialization.StringSerializer;
import org.apache.kafka.common.utils.internals.AppInfoParser;

/**
 * Drives the Apache Kafka Java client (kafka-clients) for the kproxy e2e
 * compatibility suite, following e2e/clients/CONTRACT.md: one command per
 * run, exit status 0 on success, a one-line reason on stderr otherwise,
 * nothing on stdout but the features JSON.
 */
public final class KafkaDriver {
    /** Exit status of consume when the timeout passed before every key arrived. */
    private static final int EXIT_TIMEOUT = 3;

    /** A failure to report as the one-line reason. */
    private static final class Fail extends Exception {
        Fail(String msg) {
            super(msg);
        }
    }

    public static void main(String[] argv) {
        int code;
        try {
            if (argv.length == 0) {
                throw new Fail("usage: KafkaDriver features|produce|consume|admin|create-topic|delete-topic|perf [flags]");
            }
            Map<String, String> f = flags(argv);
            switch (argv[0]) {
                case "features":
                    features();
                    code = 0;
                    break;
                case "produce":
                    produce(f);
                    code = 0;
                    break;
                case "consume":
                    code = consume(f);
                    break;
                case "admin":
                    admin(f);
                    code = 0;
                    break;
                case "create-topic":
                    createTopic(f);
                    code = 0;
                    break;
                case "delete-topic":
                    deleteTopic(f);
                    code = 0;
                    break;
                case "perf":
                    perf(f);
                    code = 0;
                    break;
                default:
                    throw new Fail("unknown command " + argv[0]);
            }
        } catch (Fail e) {
            System.err.println("java driver: " + e.getMessage());
            code = 1;
        } catch (Throwable e) {
            System.err.println("java driver: " + describe(e));
            code = 1;
        }
        System.out.flush();
        System.err.flush();
        // The client may leave non-daemon threads behind; the exit status is what counts.
        System.exit(code);
    }

    /** Parses "--name value" pairs and bare "--name" switches after the command. */
    private static Map<String, String> flags(String[] argv) throws Fail {
        Map<String, String> f = new HashMap<>();
        for (int i = 1; i < argv.length; i++) {
            String a = argv[i];
            if (!a.startsWith("--")) {
                throw new Fail("unexpected argument " + a);
            }
            String name = a.substring(2);
            if (i + 1 < argv.length && !argv[i + 1].startsWith("--")) {
                f.put(name, argv[++i]);
            } else {
                f.put(name, "");
            }
        }
        return f;
    }

    private static String need(Map<String, String> f, String name) throws Fail {
        String v = f.get(name);
        if (v == null || v.isEmpty()) {
            throw new Fail("--" + name + " is required");
        }
        return v;
    }

    private static int intFlag(Map<String, String> f, String name) throws Fail {
        String v = need(f, name);
        try {
            return Integer.parseInt(v);
        } catch (NumberFormatException e) {
            throw new Fail("--" + name + " " + v + ": not a number");
        }
    }

    /** The root cause of e, on one line. */
    private static String describe(Throwable e) {
        Throwable c = e;
        while ((c instanceof ExecutionException || c instanceof java.util.concurrent.CompletionException) && c.getCause() != null) {
            c = c.getCause();
        }
        String s = c.getClass().getSimpleName() + ": " + c.getMessage();
        return s.replace('\n', ' ');
    }

    /** Prints the client name and version; Java supports every feature. */
    private static void features() {
        String name = "Java kafka-clients " + AppInfoParser.getVersion();
        System.out.println("{\"name\": \"" + name.replace("\"", "'") + "\", \"unsupported\": {}}");
    }

    /** Connection settings shared by producers, consumers and admin clients. */
    private static Properties connProps(Map<String, String> f) throws Fail {
        Properties p = new Properties();
        p.put(CommonClientConfigs.BOOTSTRAP_SERVERS_CONFIG, need(f, "bootstrap"));
        String ca = f.getOrDefault("tls-ca", "");
        if (!ca.isEmpty()) {
            p.put(CommonClientConfigs.SECURITY_PROTOCOL_CONFIG, "SSL");
            tlsProps(p, ca, f.getOrDefault("tls-cert", ""), f.getOrDefault("tls-key", ""));
        }
        String mech = f.getOrDefault("sasl-mechanism", "");
        if (!mech.isEmpty()) {
            String module;
            switch (mech) {
                case "PLAIN":
                    module = "org.apache.kafka.common.security.plain.PlainLoginModule";
                    break;
                case "SCRAM-SHA-512":
                    module = "org.apache.kafka.common.security.scram.ScramLoginModule";
                    break;
                default:
                    throw new Fail("unsupported SASL mechanism " + mech);
            }
            p.put(CommonClientConfigs.SECURITY_PROTOCOL_CONFIG, ca.isEmpty() ? "SASL_PLAINTEXT" : "SASL_SSL");
            p.put(SaslConfigs.SASL_MECHANISM, mech);
            p.put(SaslConfigs.SASL_JAAS_CONFIG, module + " required username=\"" + jaasQuote(f.getOrDefault("sasl-user", ""))
                    + "\" password=\"" + jaasQuote(f.getOrDefault("sasl-password", "")) + "\";");
        }
        return p;
    }

    /**
     * TLS from PEM files, given to the client as PEM text: a file-based PEM
     * key store would need an encrypted key. Host name verification stays
     * on (the default, "https"), IP addresses included.
     */
    private static void tlsProps(Properties p, String ca, String cert, String key) throws Fail {
        if (!cert.isEmpty() && key.isEmpty()) {
            throw new Fail("--tls-cert needs --tls-key");
        }
        p.put(SslConfigs.SSL_TRUSTSTORE_TYPE_CONFIG, "PEM");
        p.put(SslConfigs.SSL_TRUSTSTORE_CERTIFICATES_CONFIG, readText(ca));
        if (!cert.isEmpty()) {
            p.put(SslConfigs.SSL_KEYSTORE_TYPE_CONFIG, "PEM");
            p.put(SslConfigs.SSL_KEYSTORE_CERTIFICATE_CHAIN_CONFIG, readText(cert));
            p.put(SslConfigs.SSL_KEYSTORE_KEY_CONFIG, readText(key));
        }
    }

    private static String readText(String file) throws Fail {
        try {
            return new String(Files.readAllBytes(Paths.get(file)), StandardCharsets.UTF_8);
        } catch (IOException e) {
            throw new Fail("reading " + file + ": " + describe(e));
        }
    }

    private static String jaasQuote(String s) {
        return s.replace("\\", "\\\\").replace("\"", "\\\"");
    }

    /** Reads key<TAB>value lines. */
    private static List<String[]> readRecords(String file) throws IOException, Fail {
        List<String[]> recs = new ArrayList<>();
        int n = 0;
        for (String line : Files.readAllLines(Paths.get(file), StandardCharsets.UTF_8)) {
            n++;
            if (line.isEmpty()) {
                continue;
            }
            int tab = line.indexOf('\t');
            if (tab < 0) {
                throw new Fail(file + " line " + n + ": want key<TAB>value");
            }
            recs.add(new String[] {line.substring(0, tab), line.substring(tab + 1)});
        }
        return recs;
    }

    /**
     * Produces the --input records (after an aborted transaction of the
     * --aborted records when --transactional-id is set) and fails on the
     * first record the client reports an error for.
     */
    private static void produce(Map<String, String> f) throws Exception {
        String topic = need(f, "topic");
        List<String[]> recs = readRecords(need(f, "input"));
        String acks = f.getOrDefault("acks", "all");
        if (!acks.equals("all") && !acks.equals("1") && !acks.equals("0")) {
            throw new Fail("unknown acks " + acks);
        }
        String txnID = f.getOrDefault("transactional-id", "");
        Properties p = connProps(f);
        p.put(ProducerConfig.KEY_SERIALIZER_CLASS_CONFIG, StringSerializer.class.getName());
        p.put(ProducerConfig.VALUE_SERIALIZER_CLASS_CONFIG, StringSerializer.class.getName());
        p.put(ProducerConfig.COMPRESSION_TYPE_CONFIG, f.getOrDefault("compression", "none"));
        p.put(ProducerConfig.ACKS_CONFIG, acks);
        p.put(ProducerConfig.DELIVERY_TIMEOUT_MS_CONFIG, "60000");
        if (!acks.equals("all")) {
            if (f.containsKey("idempotent") || !txnID.isEmpty()) {
                throw new Fail("an idempotent or transactional producer needs --acks all");
            }
            // Idempotence needs acks=all: set explicitly, the client refuses the mix.
            p.put(ProducerConfig.ENABLE_IDEMPOTENCE_CONFIG, "false");
        } else if (f.containsKey("idempotent") || !txnID.isEmpty()) {
            p.put(ProducerConfig.ENABLE_IDEMPOTENCE_CONFIG, "true");
        }
        if (!txnID.isEmpty()) {
            p.put(ProducerConfig.TRANSACTIONAL_ID_CONFIG, txnID);
        }
        try (KafkaProducer<String, String> producer = new KafkaProducer<>(p)) {
            if (txnID.isEmpty()) {
                long paceMs = f.containsKey("pace-ms") ? intFlag(f, "pace-ms") : 0;
                send(producer, topic, recs, paceMs);
                return;
            }
            List<String[]> aborted = readRecords(need(f, "aborted"));
            producer.initTransactions();
            producer.beginTransaction();
            send(producer, topic, aborted, 0);
            producer.abortTransaction();
            producer.beginTransaction();
            send(producer, topic, recs, 0);
            producer.commitTransaction();
        }
    }

    /**
     * Sends recs, paceMs apart when paceMs is above 0 (the producer then
     * stays connected and busy for the whole run), waits for every
     * acknowledgement and fails on the first error.
     */
    private static void send(KafkaProducer<String, String> producer, String topic, List<String[]> recs, long paceMs)
            throws Fail, InterruptedException {
        AtomicReference<Exception> first = new AtomicReference<>();
        for (int i = 0; i < recs.size(); i++) {
            String[] r = recs.get(i);
            if (paceMs > 0 && i > 0) {
                Thread.sleep(paceMs);
            }
            producer.send(new ProducerRecord<>(topic, r[0], r[1]), (md, err) -> {
                if (err != null) {
                    first.compareAndSet(null, err);
                }
            });
            if (first.get() != null) {
                break;
            }
        }
        producer.flush();
        if (first.get() != null) {
            throw new Fail("produce to " + topic + ": " + describe(first.get()));
        }
    }

    /**
     * Consumes --topic in group --group with --members consumers on their
     * own threads, appending member<TAB>partition<TAB>key<TAB>value lines to
     * --output, until --count distinct keys arrived (0) or --timeout-ms
     * passed (EXIT_TIMEOUT).
     */
    private static int consume(Map<String, String> f) throws Exception {
        String topic = need(f, "topic");
        int count = intFlag(f, "count");
        int members = f.containsKey("members") ? intFlag(f, "members") : 1;
        long timeoutMs = Long.parseLong(need(f, "timeout-ms"));
        String protocol = f.getOrDefault("protocol", "classic");
        Properties p = connProps(f);
        p.put(ConsumerConfig.GROUP_ID_CONFIG, need(f, "group"));
        p.put(ConsumerConfig.GROUP_PROTOCOL_CONFIG, protocol);
        p.put(ConsumerConfig.AUTO_OFFSET_RESET_CONFIG, "earliest");
        p.put(ConsumerConfig.ENABLE_AUTO_COMMIT_CONFIG, "false");
        p.put(ConsumerConfig.KEY_DESERIALIZER_CLASS_CONFIG, StringDeserializer.class.getName());
        p.put(ConsumerConfig.VALUE_DESERIALIZER_CLASS_CONFIG, StringDeserializer.class.getName());
        p.put(ConsumerConfig.ISOLATION_LEVEL_CONFIG, f.containsKey("read-committed") ? "read_committed" : "read_uncommitted");

        Set<String> seen = new HashSet<>();
        CountDownLatch done = new CountDownLatch(1);
        AtomicBoolean stop = new AtomicBoolean();
        AtomicReference<String> failure = new AtomicReference<>();
        List<Thread> threads = new ArrayList<>();
        try (BufferedWriter out = Files.newBufferedWriter(Paths.get(need(f, "output")), StandardCharsets.UTF_8,
                StandardOpenOption.CREATE, StandardOpenOption.APPEND)) {
            for (int m = 0; m < members; m++) {
                final int member = m;
                Properties mp = (Properties) p.clone();
                mp.put(ConsumerConfig.CLIENT_ID_CONFIG, "kproxy-e2e-java-" + member);
                Thread t = new Thread(() -> {
                    KafkaConsumer<String, String> c = null;
                    try {
                        c = new KafkaConsumer<>(mp);
                        c.subscribe(List.of(topic));
                        while (!stop.get()) {
                            ConsumerRecords<String, String> recs = c.poll(Duration.ofMillis(200));
                            if (recs.isEmpty()) {
                                continue;
                            }
                            synchronized (seen) {
                                for (ConsumerRecord<String, String> r : recs) {
                                    org.apache.kafka.common.header.Header tp = r.headers().lastHeader("traceparent");
                                    String traceparent = tp == null || tp.value() == null ? "" : new String(tp.value(), StandardCharsets.UTF_8);
                                    out.write(member + "\t" + r.partition() + "\t" + r.key() + "\t" + r.value() + "\t" + traceparent + "\n");
                                    seen.add(r.key());
                                }
                                if (seen.size() >= count) {
                                    done.countDown();
                                }
                            }
                            try {
                                c.commitSync();
                            } catch (CommitFailedException | RebalanceInProgressException e) {
                                // The group moved on: another member gets these records again.
                            }
                        }
                    } catch (Throwable e) {
                        failure.compareAndSet(null, "member " + member + ": " + describe(e));
                        done.countDown();
                    } finally {
                        if (c != null) {
                            try {
                                c.close(CloseOptions.timeout(Duration.ofSeconds(5)));
                            } catch (Throwable e) {
                                // Leaving the group is best effort once the keys are in.
                            }
                        }
                    }
                }, "consumer-" + member);
                t.setDaemon(true);
                threads.add(t);
                t.start();
            }
            boolean finished = done.await(timeoutMs, TimeUnit.MILLISECONDS);
            stop.set(true);
            for (Thread t : threads) {
                t.join(15_000);
            }
            synchronized (seen) {
                out.flush();
                if (failure.get() != null) {
                    throw new Fail("consume " + topic + ": " + failure.get());
                }
                if (!finished || seen.size() < count) {
                    System.err.println("java driver: " + seen.size() + " of " + count + " keys after " + timeoutMs + "ms");
                    return EXIT_TIMEOUT;
                }
            }
        }
        return 0;
    }

    /**
     * Creates --topic with --partitions, checks the partition count, deletes
     * it and waits until it is no longer listed.
     */
    private static void admin(Map<String, String> f) throws Exception {
        String topic = need(f, "topic");
        int parts = intFlag(f, "partitions");
        Properties p = connProps(f);
        p.put(CommonClientConfigs.REQUEST_TIMEOUT_MS_CONFIG, "30000");
        try (Admin admin = Admin.create(p)) {
            admin.createTopics(List.of(new NewTopic(topic, parts, (short) 1))).all().get(60, TimeUnit.SECONDS);
            TopicDescription d = null;
            long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(30);
            while (d == null) {
                try {
                    d = admin.describeTopics(List.of(topic)).allTopicNames().get(30, TimeUnit.SECONDS).get(topic);
                } catch (ExecutionException e) {
                    // A new topic may take a moment to reach the metadata cache.
                    if (!(e.getCause() instanceof UnknownTopicOrPartitionException) || System.nanoTime() > deadline) {
                        throw new Fail("describe " + topic + ": " + describe(e));
                    }
                    Thread.sleep(200);
                }
            }
            if (d.partitions().size() != parts) {
                throw new Fail("describe " + topic + ": " + d.partitions().size() + " partitions, want " + parts);
            }
            admin.deleteTopics(List.of(topic)).all().get(60, TimeUnit.SECONDS);
            deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(30);
            while (true) {
                Set<String> names = admin.listTopics().names().get(30, TimeUnit.SECONDS);
                if (!names.contains(topic)) {
                    return;
                }
                if (System.nanoTime() > deadline) {
                    throw new Fail(topic + " still listed 30s after its deletion");
                }
                Thread.sleep(200);
            }
        }
    }

    /** An admin client for the one-call commands: the default retries, a 30s request timeout. */
    private static Admin oneCallAdmin(Map<String, String> f) throws Fail {
        Properties p = connProps(f);
        p.put(CommonClientConfigs.REQUEST_TIMEOUT_MS_CONFIG, "30000");
        return Admin.create(p);
    }

    /**
     * Creates --topic with --partitions (replication factor 1) with one
     * createTopics call; its failure (a PolicyViolationException, say)
     * reaches main, which prints its class and message.
     */
    private static void createTopic(Map<String, String> f) throws Exception {
        String topic = need(f, "topic");
        int parts = intFlag(f, "partitions");
        try (Admin admin = oneCallAdmin(f)) {
            admin.createTopics(List.of(new NewTopic(topic, parts, (short) 1))).all().get(60, TimeUnit.SECONDS);
        }
    }

    /** Deletes --topic with one deleteTopics call, as createTopic. */
    private static void deleteTopic(Map<String, String> f) throws Exception {
        String topic = need(f, "topic");
        try (Admin admin = oneCallAdmin(f)) {
            admin.deleteTopics(List.of(topic)).all().get(60, TimeUnit.SECONDS);
        }
    }

    /**
     * Runs ProducerPerformance then ConsumerPerformance for --count records
     * of --size bytes, each as a child JVM on this classpath (both tools
     * call exit), and fails unless both exit 0 and report every record.
     */
    private static void perf(Map<String, String> f) throws Exception {
        String topic = need(f, "topic");
        int n = intFlag(f, "count");
        int size = intFlag(f, "size");
        String bootstrap = need(f, "bootstrap");

        // SASL settings, when given, reach the tools through a config file.
        Path config = Files.createTempFile("kproxy-e2e-perf-", ".properties");
        try {
            Properties cp = connProps(f);
            cp.remove(CommonClientConfigs.BOOTSTRAP_SERVERS_CONFIG);
            try (BufferedWriter w = Files.newBufferedWriter(config, StandardCharsets.UTF_8)) {
                cp.store(w, "kproxy e2e perf");
            }

            String prodOut = tool("ProducerPerformance", 120, "org.apache.kafka.tools.ProducerPerformance",
                    "--bootstrap-server", bootstrap, "--topic", topic, "--num-records", Integer.toString(n),
                    "--record-size", Integer.toString(size), "--throughput", "-1",
                    "--command-config", config.toString(), "--command-property", "acks=all");
            if (!prodOut.contains("\n" + n + " records sent,") && !prodOut.startsWith(n + " records sent,")) {
                throw new Fail("ProducerPerformance did not report " + n + " records sent: " + lastLine(prodOut));
            }

            String consOut = tool("ConsumerPerformance", 120, "org.apache.kafka.tools.ConsumerPerformance",
                    "--bootstrap-server", bootstrap, "--topic", topic, "--num-records", Integer.toString(n),
                    "--group", "perf-" + topic, "--timeout", "30000", "--command-config", config.toString());
            long got = consumedRecords(consOut);
            if (got < n) {
                throw new Fail("ConsumerPerformance read " + got + " of " + n + " records: " + tail(consOut, 3).replace("\n", " / "));
            }
        } finally {
            Files.deleteIfExists(config);
        }
    }

    /** Runs a tool's main class in a child JVM like this one and returns its output. */
    private static String tool(String name, int timeoutSec, String mainClass, String... args) throws Exception {
        List<String> cmd = new ArrayList<>();
        cmd.add(Paths.get(System.getProperty("java.home"), "bin", "java").toString());
        for (String a : ManagementFactory.getRuntimeMXBean().getInputArguments()) {
            if (!a.startsWith("-agentlib") && !a.startsWith("-javaagent")) {
                cmd.add(a);
            }
        }
        cmd.add("-cp");
        cmd.add(System.getProperty("java.class.path"));
        cmd.add(mainClass);
        cmd.addAll(List.of(args));
        Process proc = new ProcessBuilder(cmd).redirectErrorStream(true).start();
        proc.getOutputStream().close();
        StringBuilder buf = new StringBuilder();
        Thread reader = new Thread(() -> {
            try (InputStream in = proc.getInputStream()) {
                buf.append(new String(in.readAllBytes(), StandardCharsets.UTF_8));
            } catch (IOException e) {
                // The process is gone; its exit status tells.
            }
        });
        reader.start();
        if (!proc.waitFor(timeoutSec, TimeUnit.SECONDS)) {
            proc.destroyForcibly();
            reader.join(5000);
            throw new Fail(name + " still running after " + timeoutSec + "s: " + lastLine(buf.toString()));
        }
        reader.join(5000);
        String out = buf.toString();
        if (proc.exitValue() != 0) {
            System.err.println(tail(out, 10));
            throw new Fail(name + " exited " + proc.exitValue());
        }
        return out;
    }

    /**
     * The data.consumed.in.nMsg column of ConsumerPerformance's report, or
     * -1: the first row after the header with as many fields (a warning may
     * come between them).
     */
    private static long consumedRecords(String out) {
        String[] lines = out.split("\n");
        for (int i = 0; i < lines.length; i++) {
            String[] head = lines[i].split(",\\s*");
            int col = List.of(head).indexOf("data.consumed.in.nMsg");
            if (col < 0) {
                continue;
            }
            for (int j = i + 1; j < lines.length; j++) {
                String[] row = lines[j].split(",\\s*");
                if (row.length == head.length) {
                    try {
                        return Long.parseLong(row[col].trim());
                    } catch (NumberFormatException e) {
                        return -1;
                    }
                }
            }
        }
        return -1;
    }

    private static String lastLine(String s) {
        return tail(s, 1);
    }

    private static String tail(String s, int n) {
        String[] lines = s.strip().split("\n");
        int from = Math.max(0, lines.length - n);
        return String.join("\n", java.util.Arrays.copyOfRange(lines, from, lines.length));
    }
}
