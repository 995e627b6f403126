// Package vm runs factory VMs with qemu: it builds the qemu command line, picks the
// accelerator (probing KVM for real and falling back to TCG with scaled timeouts),
// captures the serial console to a file, and turns the guest agent's virtio-serial
// messages (seeds/node/agent) into an ordered stream of events.
//
// A Machine's qemu runs in its own process group and dies with its context, with Stop,
// or with the process that started it; nothing it starts outlives it.
package vm
