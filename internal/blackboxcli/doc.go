// Package blackboxcli holds what only the blackbox binary (cmd/blackbox)
// adds to the CLI, so that a user's binary built with cli.New links none of
// it: the torture harness (WithTorture) and demo --kafka's in-process
// Kafka cluster (WithKafkaDemo, kfake). Options returns both.
package blackboxcli

import "github.com/blackbox-audit/blackbox/cmd/cli"

// Options are the options of cmd/blackbox: WithTorture and WithKafkaDemo.
func Options() []cli.Option { return []cli.Option{WithTorture(), WithKafkaDemo()} }
