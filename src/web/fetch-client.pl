#!/bin/sh
# `web` as installed (package.json's bin; tsup copies this file to dist/web/web). In a turn, a
# plain `web fetch` is sent to the run's browser proxy by the Perl below: a Node process costs
# ~0.1 s of CPU before it does anything, Perl (perl-base, in every Debian) a few milliseconds, and
# the page is read by the warm service either way. Everything else, and a system without Perl,
# runs the Node CLI (dist/web/cli.js), whose own thin client (fetch-client.ts) serves the owner's
# terminal. The Perl side does only what it is sure of: any doubt before the request is sent
# (a flag it does not know, a value it would not take, bytes that are not UTF-8, no proxy) goes
# to the Node CLI, which gives every answer and error it always gave.
command -v perl >/dev/null 2>&1 && exec perl -x "$0" "$@"
exec node "$(dirname "$(readlink -f "$0")")/cli.js" "$@"
#!perl
use strict;
use Socket qw(AF_UNIX SOCK_STREAM pack_sockaddr_un);

sub node_cli {
  require Cwd;
  require File::Basename;
  my $cli = File::Basename::dirname(Cwd::abs_path($0)) . '/cli.js';
  exec('node', $cli, @ARGV) or die "Error: cannot run node for $cli: $! - install Node.js 20 or later\n";
}

# thinFetchRequest's rules (fetch-client.ts): `fetch <url>` with known flags and valid values.
my %switches = ('--raw' => 'raw', '--fresh' => 'fresh', '--json' => 'json');
my %numbers = ('--max-chars' => 'max_chars', '--timeout' => 'timeout_seconds', '--max-bytes' => 'max_bytes');
my $socket_path = $ENV{THECLAW_BROWSER_SOCKET};
node_cli() unless defined $socket_path && $socket_path ne '' && @ARGV && $ARGV[0] eq 'fetch';
my $utf8 = qr/\A(?:[\x00-\x7F]|[\xC2-\xDF][\x80-\xBF]|\xE0[\xA0-\xBF][\x80-\xBF]|[\xE1-\xEC\xEE\xEF][\x80-\xBF]{2}|\xED[\x80-\x9F][\x80-\xBF]|\xF0[\x90-\xBF][\x80-\xBF]{2}|[\xF1-\xF3][\x80-\xBF]{3}|\xF4[\x80-\x8F][\x80-\xBF]{2})*\z/;
my (%flags, $url);
for (my $at = 1; $at < @ARGV; $at++) {
  my $arg = $ARGV[$at];
  node_cli() if $arg !~ $utf8 || index($arg, "\xEF\xBF\xBD") >= 0;
  my ($flag, $value) = $arg =~ /\A(--[^=]*)=(.*)\z/s ? ($1, $2) : ($arg, undef);
  if (exists $switches{$flag} && !defined $value) {
    $flags{$switches{$flag}} = 'true';
  } elsif (exists $numbers{$flag}) {
    $value = $ARGV[++$at] unless defined $value;
    node_cli() unless defined $value && $value =~ /\A\d+\z/;
    (my $number = $value) =~ s/\A0+//;
    node_cli() if $number eq '' || length($number) > 16 || (length($number) == 16 && $number gt '9007199254740991');
    $flags{$numbers{$flag}} = $number;
  } elsif ($arg =~ /\A-/ || defined $url) {
    node_cli();
  } else {
    $url = $arg;
  }
}
node_cli() unless defined $url;

sub json_string {
  my ($text) = @_;
  $text =~ s/(["\\])/\\$1/g;
  $text =~ s/([\x00-\x1f])/sprintf('\u%04x', ord $1)/ge;
  return qq("$text");
}

# A string of the reply as the bytes Node would print it (a lone surrogate as U+FFFD, as Node writes it).
my %escapes = ('"' => '"', '\\' => '\\', '/' => '/', b => "\b", f => "\f", n => "\n", r => "\r", t => "\t");
sub json_text {
  my ($token) = @_;
  $token =~ s/\\(?:u([0-9a-fA-F]{4})|(.))/defined $1 ? unicode(hex $1) : $escapes{$2}/ges;
  return $token;
}
sub unicode {
  my ($code) = @_;
  return "\xEF\xBF\xBD" if $code >= 0xD800 && $code <= 0xDFFF;
  my $char = chr $code;
  utf8::encode($char);
  return $char;
}

my $timeout_ms = ($flags{timeout_seconds} // 30) * 1000 + 60_000;
my $request = '{"op":"fetch","url":' . json_string($url) . join('', map { qq(,"$_":$flags{$_}) } sort keys %flags) . "}\n";
socket(my $socket, AF_UNIX, SOCK_STREAM, 0) or die "Error: cannot open a socket: $!\n";
# Nobody listening (a run that ended): the Node CLI, which fetches without the service.
connect($socket, pack_sockaddr_un($socket_path)) or node_cli();
binmode $socket;
syswrite($socket, $request) == length $request or node_cli();

# The CLI's error line (core/errors.ts formatError), from the reply's JSON strings: control
# characters stay escaped as JSON escapes them, which is the one line formatError writes.
sub fail {
  my ($kind, $what, $suggestion) = @_;
  if ($flags{json}) {
    print '{"error":', $what, defined $suggestion ? (',"suggestion":', $suggestion) : (), "}\n";
  } else {
    my $line = 'Error: ' . one_line($what) . (defined $suggestion ? ' - ' . one_line($suggestion) : '');
    print STDERR "$line\n";
  }
  exit($kind eq 'usage' ? 2 : 1);
}
sub one_line {
  my ($token) = @_;
  $token =~ s/\\(?:(["\\\/])|u([dD][89a-fA-F][0-9a-fA-F]{2}))/defined $1 ? $1 : "\xEF\xBF\xBD"/ge;
  return substr($token, 1, -1);
}

my $reply = '';
my $ready = '';
vec($ready, fileno($socket), 1) = 1;
while (1) {
  my $readable = select(my $out = $ready, undef, undef, $timeout_ms / 1000);
  fail('timeout', json_string("no answer on $socket_path within $timeout_ms ms")) unless $readable;
  my $read = sysread($socket, $reply, 1 << 20, length $reply);
  fail('io', json_string("$!")) unless defined $read;
  last if $read == 0;
}
close $socket;
my ($line) = $reply =~ /\A([^\n]*)/;
fail('io', json_string("the daemon on $socket_path closed the connection without an answer")) if $line eq '';

# The reply read in order, as the service's JSON.stringify writes it (core/ipc.ts); a regex over
# the whole of a long JSON string would reach Perl's recursion limit.
sub literal { my ($text) = @_; return $line =~ /\G\Q$text\E/gc }
sub string {
  my $at = pos($line);
  return undef unless $line =~ /\G"/gc;
  while (1) {
    $line =~ /\G[^"\\]*+/gc;
    return substr($line, $at, pos($line) - $at) if $line =~ /\G"/gc;
    return undef unless $line =~ /\G\\./gcs;
  }
}
pos($line) = 0;
if (literal('{"ok":true,"result":{"stdout":') and defined(my $stdout = string()) and literal('}}') and pos($line) == length $line) {
  $SIG{PIPE} = 'IGNORE'; # a reader that went away (| head) is not an error
  binmode STDOUT;
  print json_text(substr($stdout, 1, -1));
  exit 0;
}
pos($line) = 0;
if (literal('{"ok":false,"error":') and defined(my $what = string())) {
  my $suggestion = literal(',"suggestion":') ? string() : undef;
  if ($line =~ /\G,"kind":"(\w+)"(?:,"status":\d+)?\}\z/gc) {
    my $kind = $1;
    # A service from before fetches (an upgrade meanwhile) refuses the request as not a browser command.
    node_cli() if $kind eq 'usage' && $what =~ /\A"invalid browser request/;
    fail($kind, $what, $suggestion);
  }
}
fail('io', json_string("the daemon on $socket_path answered with malformed JSON"));
