// Package coordinator is kafgres's group coordinator: it keeps consumer
// groups' membership in memory, runs Kafka's classic and KIP-848 group
// protocols, and rules on which members may commit or fetch offsets. Wire
// encoding and the committed offsets themselves stay in package broker.
package coordinator
