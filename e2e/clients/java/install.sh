#!/usr/bin/env bash
# Compiles the Java client driver (KafkaDriver) against the Apache Kafka
# 4.4.0 jars run.sh fetched into CACHE/kafka-4.4.0/libs, into
# CACHE/java-driver/classes. A stamp of the sources and the jar listing
# skips the compile when nothing changed.
#
#   bash e2e/clients/java/install.sh CACHE
set -euo pipefail
cache=${1:?usage: install.sh CACHE}
here=$(cd "$(dirname "$0")" && pwd)
libs=$cache/kafka-4.4.0/libs
out=$cache/java-driver
command -v javac >/dev/null || { echo "e2e java driver: javac is required: install a JDK 17+ (Debian: apt-get install openjdk-17-jdk-headless)" >&2; exit 1; }
ls "$libs"/kafka-clients-*.jar >/dev/null 2>&1 || { echo "e2e java driver: no kafka-clients jar in $libs: run bash e2e/run.sh, which fetches Apache Kafka 4.4.0" >&2; exit 1; }

stamp=$({ cat "$here"/*.java; ls "$libs"; javac -version 2>&1; } | sha256sum | cut -d' ' -f1)
if [ -f "$out/classes/KafkaDriver.class" ] && [ -f "$out/stamp" ] && [ "$(cat "$out/stamp")" = "$stamp" ]; then
  echo "== e2e: java driver is up to date in $out/classes"
  exit 0
fi
echo "== e2e: compiling the java driver into $out/classes"
rm -rf "$out/classes.tmp" "$out/stamp"
mkdir -p "$out/classes.tmp"
javac --release 17 -Xlint:-options -cp "$libs/*" -d "$out/classes.tmp" "$here"/*.java
rm -rf "$out/classes"
mv "$out/classes.tmp" "$out/classes"
echo "$stamp" >"$out/stamp"
