#!/usr/bin/perl
# perl_echo.pl ADDR PORT MODE(fork|exec)
use strict; use IO::Socket::INET; use POSIX ();
my ($addr,$port,$mode)=@ARGV;
$SIG{CHLD}='IGNORE';
my $l=IO::Socket::INET->new(LocalAddr=>$addr, LocalPort=>$port, Listen=>128, ReuseAddr=>1, Proto=>'tcp') or die "listen: $!";
print STDERR "listening\n";
while (1) {
  my $c=$l->accept; next unless $c;
  my $pid=fork; die "fork: $!" unless defined $pid;
  if ($pid==0) {
    close $l;
    if ($mode eq 'exec') {
      open(STDIN, "<&", $c) or die; open(STDOUT, ">&", $c) or die; close $c;
      exec('/bin/cat') or die "exec: $!";
    }
    my $buf;
    while (1) {
      my $n=sysread($c,$buf,65536);
      die "read: $!" unless defined $n; last if $n==0;
      my $off=0;
      while ($off<$n) { my $w=syswrite($c,$buf,$n-$off,$off); die "write: $!" unless defined $w; $off+=$w; }
    }
    shutdown($c,1); close $c; POSIX::_exit(0);
  }
  close $c;
}
