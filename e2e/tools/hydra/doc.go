// Package hydra pins the Ory Hydra release that the end-to-end suite
// builds as a tool (`go build github.com/ory/hydra/v2` in this
// directory): a real OAuth 2.0 authorization server for the oauth column,
// issuing JWT access tokens that Apache Kafka validates against its JWKS.
// It is a module of its own so that Hydra's dependency graph never mixes
// with the Kafka clients the suite tests.
package hydra
