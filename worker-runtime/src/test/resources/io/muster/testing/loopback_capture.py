"""Captures the TCP payloads that cross the loopback interface, for a test that must show what
crosses it in clear. Linux, as root: an AF_PACKET socket on lo. Writes one record per segment
(source port, destination port and length as three big-endian u16, then the payload) until SIGTERM
or the time limit; prints 'capturing' once ready and, at the end, 'dropped N': the frames the
kernel could not hand it."""
import signal
import socket
import struct
import sys

out_path, limit = sys.argv[1], float(sys.argv[2])
stop = False


def end(*_):
    global stop
    stop = True


signal.signal(signal.SIGTERM, end)
signal.signal(signal.SIGALRM, end)
signal.setitimer(signal.ITIMER_REAL, limit)
sock = socket.socket(socket.AF_PACKET, socket.SOCK_RAW, socket.ntohs(0x0003))
sock.setsockopt(socket.SOL_SOCKET, 33, 256 << 20)  # SO_RCVBUFFORCE: past net.core.rmem_max, as root
sock.bind(("lo", 0))
sock.settimeout(0.2)
print("capturing", flush=True)
with open(out_path, "wb") as out:
    while not stop:
        try:
            frame, address = sock.recvfrom(1 << 16)
        except (socket.timeout, InterruptedError):
            continue
        if address[2] == socket.PACKET_OUTGOING:  # lo shows each frame twice: keep the incoming copy
            continue
        ethertype = struct.unpack("!H", frame[12:14])[0]
        ip = frame[14:]
        if ethertype == 0x0800 and ip[9] == 6:  # IPv4, TCP
            header, total = (ip[0] & 0xF) * 4, struct.unpack("!H", ip[2:4])[0]
        elif ethertype == 0x86DD and ip[6] == 6:  # IPv6, TCP without extension headers
            header, total = 40, 40 + struct.unpack("!H", ip[4:6])[0]
        else:
            continue
        tcp = ip[header:total]
        payload = tcp[(tcp[12] >> 4) * 4:]
        if payload:
            out.write(tcp[:4] + struct.pack("!H", len(payload)) + payload)
packets, dropped = struct.unpack("II", sock.getsockopt(263, 6, 8))  # SOL_PACKET, PACKET_STATISTICS
print("dropped %d" % dropped, flush=True)
