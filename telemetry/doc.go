// Package telemetry is what kproxy learns of its clients from the traffic
// it relays, with no broker plugin and no request of its own: consumer
// lag read from Fetch requests and responses (telemetry.lag). It owns the
// `telemetry:` section of kproxy.yaml.
package telemetry
