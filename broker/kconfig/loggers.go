package kconfig

// Broker loggers (resource type BROKER_LOGGER): kafgres has one logger,
// "root", whose level IncrementalAlterConfigs changes until the broker
// restarts (Kafka's log4j levels are not persisted either).

import (
	"log/slog"

	"github.com/kafgres/kafgres/broker/apierr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// RootLogger is the name of kafgres's one logger.
const RootLogger = "root"

// logLevels maps Kafka's (log4j) level names to slog levels.
var logLevels = map[string]slog.Level{"TRACE": -8, "DEBUG": -4, "INFO": 0, "WARN": 4, "ERROR": 8, "FATAL": 12}

// LogLevelName is Kafka's name for level: the highest log4j level at or
// below it.
func LogLevelName(level slog.Level) string {
	best := "TRACE"
	for name, l := range logLevels {
		if l <= level && l >= logLevels[best] {
			best = name
		}
	}
	return best
}

// DescribeLoggers is DescribeConfigs' answer for the broker's loggers, the
// root logger being at level.
func DescribeLoggers(level slog.Level, keys []string) []kmsg.DescribeConfigsResponseResourceConfig {
	if want := keySet(keys); want != nil && !want[RootLogger] {
		return []kmsg.DescribeConfigsResponseResourceConfig{}
	}
	c := kmsg.NewDescribeConfigsResponseResourceConfig()
	name := LogLevelName(level)
	empty := ""
	c.Name, c.Value, c.Source = RootLogger, &name, kmsg.ConfigSourceDynamicBrokerLoggerConfig
	c.Documentation = &empty
	return []kmsg.DescribeConfigsResponseResourceConfig{c}
}

// CheckLoggerOps validates IncrementalAlterConfigs operations on broker
// loggers as Kafka does and returns the new root level, if any.
func CheckLoggerOps(ops []kmsg.IncrementalAlterConfigsRequestResourceConfig) (level *slog.Level, err *apierr.Error) {
	for _, op := range ops {
		if op.Op == kmsg.IncrementalAlterConfigOpAppend || op.Op == kmsg.IncrementalAlterConfigOpSubtract {
			return nil, apierr.InvalidRequest("%s operation is not allowed for the BROKER_LOGGER resource", op.Op)
		}
		if op.Name != RootLogger {
			return nil, apierr.InvalidConfig("Logger %s does not exist!", op.Name)
		}
		if op.Op == kmsg.IncrementalAlterConfigOpDelete {
			return nil, apierr.InvalidRequest("Removing the log level of the root logger is not allowed")
		}
		l, ok := logLevels[*op.Value]
		if !ok {
			return nil, apierr.InvalidConfig("Cannot set the log level of %s to %s as it is not a supported log level. Valid log levels are DEBUG, ERROR, FATAL, INFO, TRACE, WARN", op.Name, *op.Value)
		}
		level = &l
	}
	return level, nil
}
