package blackboxcli

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"os"
	"time"

	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/blackbox-audit/blackbox/cmd/cli"
	"github.com/blackbox-audit/blackbox/internal/apps"
)

// withKafkaDemo gives `demo --kafka` an in-process Kafka cluster (kfake,
// which only cmd/blackbox links): cli.WithKafkaDemo(demoCluster).
func withKafkaDemo() cli.Option { return cli.WithKafkaDemo(demoCluster) }

// demoCluster starts an in-process Kafka cluster (kfake) with topic and
// produces each line of input to it, keyed by the line's account
// (apps.Key): one account's lines go to one partition, in order. stop
// closes the cluster (a cli.KafkaDemo).
func demoCluster(ctx context.Context, topic string, partitions int, input string) (brokers []string, stop func(), err error) {
	c, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.SeedTopics(int32(partitions), topic))
	if err != nil {
		return nil, nil, fmt.Errorf("demo: starting an in-process Kafka cluster: %w", err)
	}
	if err := produceLines(ctx, c.ListenAddrs(), topic, input); err != nil {
		c.Close()
		return nil, nil, err
	}
	return c.ListenAddrs(), c.Close, nil
}

// produceLines produces the lines of input to topic.
func produceLines(ctx context.Context, brokers []string, topic, input string) error {
	f, err := os.Open(input)
	if err != nil {
		return &apps.FileError{Path: input, Err: errors.Unwrap(err)} // err is an *fs.PathError
	}
	defer f.Close()
	var rs []*kgo.Record
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		line := sc.Text()
		rs = append(rs, &kgo.Record{Key: []byte(apps.Key(line)), Value: []byte(line)})
	}
	if err := sc.Err(); err != nil {
		return &apps.FileError{Path: input, Err: err}
	}
	cl, err := kgo.NewClient(kgo.SeedBrokers(brokers...), kgo.DefaultProduceTopic(topic),
		kgo.MaxBufferedRecords(len(rs)+1))
	if err != nil {
		return fmt.Errorf("demo: %w", err)
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	if err := cl.ProduceSync(ctx, rs...).FirstErr(); err != nil {
		return fmt.Errorf("demo: producing %s to the in-process cluster: %w", input, err)
	}
	return nil
}
