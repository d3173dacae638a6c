// Package blackboxcli holds what only the blackbox binary (cmd/blackbox)
// adds to the CLI, so that a user's binary built with cli.New links none of
// it: the torture harness (the command `torture` and its app) and demo
// --kafka's in-process Kafka cluster (kfake). Options, the package's one
// export, returns both as cli options.
package blackboxcli

import "github.com/blackbox-audit/blackbox/cmd/cli"

// Options are the options of cmd/blackbox: withTorture and withKafkaDemo.
func Options() []cli.Option { return []cli.Option{withTorture(), withKafkaDemo()} }
