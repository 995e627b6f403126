/*
 * KVM probe guest: a 512-byte boot sector that does what a real kernel does first:
 * protected mode, a first-touch write sweep over 64 MiB of RAM, 4-level paging and long mode. It
 * prints R, P, M, L on the debugcon port (0x402) as it passes each step, then exits qemu
 * through isa-debug-exit (port 0xf4, value 0x10 -> exit status 33). On hosts where KVM
 * "works" but every first touch of guest memory is slow (nested virtualisation: the
 * sweep takes seconds instead of milliseconds) or guests stall, qemu exits late or never.
 *
 * Rebuild: as probe.S -o probe.o && ld -Ttext=0x7c00 --oformat binary -e _start -o probe.bin probe.o
 */
.code16
.globl _start
_start:
  cli
  xor %ax,%ax
  mov %ax,%ds
  mov $0x402,%dx
  mov $'R',%al
  out %al,%dx
  lgdtl gdtd
  mov %cr0,%eax
  or $1,%eax
  mov %eax,%cr0
  ljmpl $0x08,$pm
.code32
pm:
  mov $0x10,%ax
  mov %ax,%ds
  mov %ax,%es
  mov %ax,%ss
  mov $0x402,%dx
  mov $'P',%al
  out %al,%dx
  mov $0x100000,%edi
  mov $0xaa55aa55,%eax
  mov $0x1000000,%ecx
  rep stosl
  mov $0x402,%dx
  mov $'M',%al
  out %al,%dx
  /* identity-map the first 2 MiB: PML4 0x1000 -> PDPT 0x2000 -> PD 0x3000 (2 MiB page) */
  mov $0x1000,%edi
  xor %eax,%eax
  mov $0xc00,%ecx
  rep stosl
  movl $0x2003,0x1000
  movl $0x3003,0x2000
  movl $0x83,0x3000
  mov $0x1000,%eax
  mov %eax,%cr3
  mov %cr4,%eax
  or $0x20,%eax
  mov %eax,%cr4
  mov $0xC0000080,%ecx
  rdmsr
  or $0x100,%eax
  wrmsr
  mov %cr0,%eax
  or $0x80000000,%eax
  mov %eax,%cr0
  ljmpl $0x18,$lm
.code64
lm:
  mov $0x402,%dx
  mov $'L',%al
  out %al,%dx
  mov $0xf4,%dx
  mov $0x10,%al
  out %al,%dx
1: hlt
  jmp 1b
.p2align 3
gdt:
  .quad 0
  .quad 0x00cf9a000000ffff
  .quad 0x00cf92000000ffff
  .quad 0x00af9a000000ffff
gdtd:
  .word gdtd-gdt-1
  .long gdt
.org 510
.byte 0x55,0xaa
