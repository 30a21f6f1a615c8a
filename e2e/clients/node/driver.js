#!/usr/bin/env node
// kafkajs driver for the kproxy e2e compatibility suite: one command per
// run, as described in ../CONTRACT.md. stdout carries only the features
// JSON; kafkajs logs (warnings and errors) go to stderr.
'use strict';

const fs = require('fs');
const { Kafka, logLevel, CompressionTypes, CompressionCodecs, Partitioners } = require('kafkajs');

const KAFKAJS_VERSION = require('kafkajs/package.json').version;

// Codecs that kafkajs does not ship come from the codec packages pinned in
// package.json; a missing one is a broken install (run install.sh), not an
// unsupported codec, so require fails loudly here.
const unsupported = {
  kip848: 'kafkajs implements only the classic group protocol (JoinGroup/SyncGroup), not KIP-848',
  'perf-tools': 'ships no load tools',
  'client-metrics': 'kafkajs implements no client metrics push (KIP-714)',
  'admin-error-message':
    "kafkajs's admin client drops a CreateTopics answer's error_message: its response parser " +
    '(CreateTopics v1+, protocol/requests/createTopics) raises KafkaJSCreateTopicError from the error code alone',
};
CompressionCodecs[CompressionTypes.Snappy] = require('kafkajs-snappy');
const LZ4Codec = require('@2l/kafkajs-lz4');
CompressionCodecs[CompressionTypes.LZ4] = new LZ4Codec().codec;
unsupported.zstd = 'kafkajs ships no zstd codec and its codec package @kafkajs/zstd builds the native addon cppzst, which fails to compile against Node 20';

const COMPRESSION = {
  none: CompressionTypes.None,
  gzip: CompressionTypes.GZIP,
  snappy: CompressionTypes.Snappy,
  lz4: CompressionTypes.LZ4,
  zstd: CompressionTypes.ZSTD,
};

const BOOL_FLAGS = new Set(['idempotent', 'read-committed', 'faults']);

function parseArgs(argv) {
  const opts = {};
  for (let i = 0; i < argv.length; i++) {
    const a = argv[i];
    if (!a.startsWith('--')) throw new Error(`unexpected argument ${JSON.stringify(a)}`);
    const name = a.slice(2);
    if (BOOL_FLAGS.has(name)) {
      opts[name] = true;
      continue;
    }
    if (i + 1 >= argv.length) throw new Error(`${a} needs a value`);
    opts[name] = argv[++i];
  }
  return opts;
}

function need(opts, ...names) {
  for (const n of names) {
    if (opts[n] === undefined) throw new Error(`--${n} is required`);
  }
}

// Logs go to stderr, warnings and errors only.
function stderrLogger() {
  return ({ namespace, level, label, log }) => {
    const { message, timestamp, logger, ...rest } = log;
    const extra = Object.keys(rest).length ? ' ' + JSON.stringify(rest) : '';
    process.stderr.write(`kafkajs ${label} [${namespace}] ${message}${extra}\n`);
  };
}

function client(opts, clientId) {
  need(opts, 'bootstrap');
  const cfg = {
    clientId,
    brokers: [opts.bootstrap],
    logLevel: logLevel.WARN,
    logCreator: stderrLogger,
    connectionTimeout: 10000,
    requestTimeout: 30000,
    retry: { retries: 10 },
  };
  if (opts['sasl-mechanism']) {
    const mech = { PLAIN: 'plain', 'SCRAM-SHA-512': 'scram-sha-512' }[opts['sasl-mechanism']];
    if (!mech) throw new Error(`SASL mechanism ${opts['sasl-mechanism']} is not supported`);
    cfg.sasl = { mechanism: mech, username: opts['sasl-user'], password: opts['sasl-password'] };
  }
  if (opts['tls-ca']) {
    // Node's tls.connect options: PEM text; the server's name (IP
    // addresses included) is verified by default.
    cfg.ssl = { ca: [fs.readFileSync(opts['tls-ca'], 'utf8')] };
    if (opts['tls-cert']) {
      need(opts, 'tls-key');
      cfg.ssl.cert = fs.readFileSync(opts['tls-cert'], 'utf8');
      cfg.ssl.key = fs.readFileSync(opts['tls-key'], 'utf8');
    }
  }
  return new Kafka(cfg);
}

function readRecords(file) {
  const text = fs.readFileSync(file, 'utf8');
  const recs = [];
  for (const line of text.split('\n')) {
    if (line === '') continue;
    const tab = line.indexOf('\t');
    if (tab < 0) throw new Error(`${file}: line without a tab: ${JSON.stringify(line)}`);
    recs.push({ key: line.slice(0, tab), value: line.slice(tab + 1) });
  }
  return recs;
}

async function produce(opts) {
  need(opts, 'topic', 'input', 'acks', 'compression');
  const compression = COMPRESSION[opts.compression];
  if (compression === undefined) throw new Error(`unknown compression ${opts.compression}`);
  if (unsupported[opts.compression]) throw new Error(`compression ${opts.compression}: ${unsupported[opts.compression]}`);
  const acks = { all: -1, 1: 1, 0: 0 }[opts.acks];
  if (acks === undefined) throw new Error(`unknown acks ${opts.acks}`);
  const txnId = opts['transactional-id'];
  const idempotent = Boolean(opts.idempotent || txnId);
  if (idempotent && acks !== -1) throw new Error('an idempotent or transactional producer needs --acks all');

  const kafka = client(opts, 'kproxy-e2e-kafkajs-producer');
  const producer = kafka.producer({
    createPartitioner: Partitioners.DefaultPartitioner,
    idempotent,
    transactionalId: txnId,
    maxInFlightRequests: idempotent ? 1 : undefined,
    allowAutoTopicCreation: false,
  });
  const recs = readRecords(opts.input);
  await producer.connect();
  try {
    if (txnId) {
      need(opts, 'aborted');
      const aborted = readRecords(opts.aborted);
      const t1 = await producer.transaction();
      try {
        await sendAll(t1, opts.topic, aborted, acks, compression);
      } finally {
        await t1.abort();
      }
      const t2 = await producer.transaction();
      try {
        await sendAll(t2, opts.topic, recs, acks, compression);
      } catch (e) {
        await t2.abort().catch(() => {});
        throw e;
      }
      await t2.commit();
    } else if (Number(opts['pace-ms'] || 0) > 0) {
      await sendPaced(producer, opts.topic, recs, acks, compression, Number(opts['pace-ms']));
    } else {
      await sendAll(producer, opts.topic, recs, acks, compression);
    }
  } finally {
    await producer.disconnect();
  }
}

// sendAll sends recs in a few requests; each send resolves once every
// partition's batch is acknowledged (acks=all) or written (acks=0).
async function sendAll(sender, topic, recs, acks, compression) {
  const chunk = 250;
  for (let i = 0; i < recs.length; i += chunk) {
    await sender.send({ topic, acks, compression, messages: recs.slice(i, i + chunk) });
  }
}

// sendPaced sends recs one per request, paceMs apart, so the producer
// stays connected and busy for the whole run.
async function sendPaced(sender, topic, recs, acks, compression, paceMs) {
  for (let i = 0; i < recs.length; i++) {
    if (i > 0) await new Promise((resolve) => setTimeout(resolve, paceMs));
    await sender.send({ topic, acks, compression, messages: [recs[i]] });
  }
}

async function consume(opts) {
  need(opts, 'topic', 'group', 'count', 'timeout-ms', 'protocol', 'members', 'output');
  if (opts.protocol !== 'classic') throw new Error(`group protocol ${opts.protocol}: ${unsupported.kip848}`);
  const count = Number(opts.count);
  const members = Number(opts.members);
  const timeoutMs = Number(opts['timeout-ms']);
  const out = fs.openSync(opts.output, 'a');
  const kafka = client(opts, 'kproxy-e2e-kafkajs-consumer');
  const seen = new Set();
  let finish;
  const done = new Promise((resolve) => { finish = resolve; });
  const consumers = [];
  for (let m = 0; m < members; m++) {
    const consumer = kafka.consumer({
      groupId: opts.group,
      readUncommitted: !opts['read-committed'],
      allowAutoTopicCreation: false,
      sessionTimeout: 30000,
      rebalanceTimeout: 30000,
      heartbeatInterval: 1000,
    });
    consumers.push(consumer);
    await consumer.connect();
    await consumer.subscribe({ topics: [opts.topic], fromBeginning: true });
    // autoCommit (the default) commits the offsets of each handled batch.
    await consumer.run({
      eachMessage: async ({ partition, message }) => {
        const key = message.key === null ? '' : message.key.toString('utf8');
        const value = message.value === null ? '' : message.value.toString('utf8');
        const h = message.headers && message.headers.traceparent;
        const tp = h === undefined || h === null ? '' : (Array.isArray(h) ? h[0] : h).toString('utf8');
        fs.writeSync(out, `${m}\t${partition}\t${key}\t${value}\t${tp}\n`);
        seen.add(key);
        if (seen.size >= count) finish(true);
      },
    });
  }
  const timer = setTimeout(() => finish(false), timeoutMs);
  const ok = await done;
  clearTimeout(timer);
  // Disconnecting commits what was handled and leaves the group.
  await Promise.race([
    Promise.allSettled(consumers.map((c) => c.disconnect())),
    new Promise((resolve) => setTimeout(resolve, 15000)),
  ]);
  fs.closeSync(out);
  if (!ok) {
    process.stderr.write(`timeout: ${seen.size} of ${count} keys after ${timeoutMs}ms\n`);
    return 3;
  }
  return 0;
}

async function admin(opts) {
  need(opts, 'topic', 'partitions');
  const topic = opts.topic;
  const partitions = Number(opts.partitions);
  const adm = client(opts, 'kproxy-e2e-kafkajs-admin').admin();
  await adm.connect();
  try {
    await adm.createTopics({
      waitForLeaders: true,
      topics: [{ topic, numPartitions: partitions, replicationFactor: 1 }],
    });
    const md = await adm.fetchTopicMetadata({ topics: [topic] });
    const t = md.topics.find((x) => x.name === topic);
    const n = t ? t.partitions.length : 0;
    if (n !== partitions) throw new Error(`describe ${topic}: ${n} partitions, want ${partitions}`);
    await adm.deleteTopics({ topics: [topic], timeout: 30000 });
    const deadline = Date.now() + 30000;
    for (;;) {
      const topics = await adm.listTopics();
      if (!topics.includes(topic)) break;
      if (Date.now() > deadline) throw new Error(`${topic} still listed 30s after its deletion`);
      await new Promise((r) => setTimeout(r, 200));
    }
  } finally {
    await adm.disconnect();
  }
}

// createTopic creates --topic with --partitions in one createTopics call
// (kafkajs retries only retriable errors); its error reaches main.
async function createTopic(opts) {
  need(opts, 'topic', 'partitions');
  const adm = client(opts, 'kproxy-e2e-kafkajs-admin').admin();
  await adm.connect();
  try {
    await adm.createTopics({
      topics: [{ topic: opts.topic, numPartitions: Number(opts.partitions), replicationFactor: 1 }],
    });
  } finally {
    await adm.disconnect();
  }
}

async function deleteTopic(opts) {
  need(opts, 'topic');
  const adm = client(opts, 'kproxy-e2e-kafkajs-admin').admin();
  await adm.connect();
  try {
    await adm.deleteTopics({ topics: [opts.topic], timeout: 30000 });
  } finally {
    await adm.disconnect();
  }
}

// describe is an error on one line: its name and message, its Kafka error
// type (INVALID_REQUIRED_ACKS, ...), the errors it aggregates and its cause.
function describe(err, depth = 0) {
  if (!err || typeof err !== 'object') return String(err);
  let s = `${err.name || 'Error'}: ${err.message}`;
  if (err.type) s += ` [${err.type}]`;
  if (depth < 3 && Array.isArray(err.errors) && err.errors.length) {
    s += ` {${err.errors.map((e) => describe(e, depth + 1)).join('; ')}}`;
  }
  if (depth < 3 && err.cause && err.cause !== err) s += ` (cause: ${describe(err.cause, depth + 1)})`;
  return s.replace(/\n/g, ' ');
}

async function main() {
  const [command, ...rest] = process.argv.slice(2);
  const opts = parseArgs(rest);
  switch (command) {
    case 'features':
      process.stdout.write(JSON.stringify({ name: `kafkajs ${KAFKAJS_VERSION}`, unsupported }) + '\n');
      return 0;
    case 'produce':
      await produce(opts);
      return 0;
    case 'consume':
      return consume(opts);
    case 'admin':
      await admin(opts);
      return 0;
    case 'create-topic':
      await createTopic(opts);
      return 0;
    case 'delete-topic':
      await deleteTopic(opts);
      return 0;
    case 'perf':
      throw new Error('perf: ships no load tools');
    default:
      throw new Error(`unknown command ${JSON.stringify(command)}`);
  }
}

main().then(
  (code) => process.exit(code),
  (err) => {
    process.stderr.write(`error: ${describe(err)}\n`);
    process.exit(1);
  },
);
