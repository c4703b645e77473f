#!/usr/bin/perl
# Copies the Markdown files the packages ship into OUTDIR, with every repository-relative link
# rewritten so that it works where the copy is read (/usr/share/doc/nthd, the tarball):
#   - a link to a file that is shipped too points at the shipped copy (relative to the copy);
#   - any other link (CHANGELOG.md, LICENSE, bench/, tests/e2e/, ...) points at that file in
#     the repository at this version's tag: URL/PATH, URL being e.g.
#     https://example.invalid/nthd/blob/v0.2.0 (packaging/build.sh derives it from Cargo.toml).
# Links in code (fences, `spans`), absolute URLs and same-page anchors are left alone.
#
# usage: perl packaging/doclinks.pl URL OUTDIR SRC=DEST...
#   SRC is a repository path (README.md, docs/install.md), DEST its path under OUTDIR and
#   under the installed doc directory (README.md, docs/install.md, README.packaging.md).
use strict;
use warnings;

my ($url, $outdir, @pairs) = @ARGV;
die "usage: $0 URL OUTDIR SRC=DEST...\n" unless defined $outdir && @pairs;
my %dest = map { split /=/, $_, 2 } @pairs;

# a/b/../c -> a/c; undef when the path leaves the repository.
sub normalize {
    my @out;
    for my $p (split m{/}, shift) {
        next if $p eq '' || $p eq '.';
        if ($p eq '..') { return undef unless @out; pop @out; next; }
        push @out, $p;
    }
    return join '/', @out;
}

sub dirname { my $p = shift; return $p =~ m{^(.*)/} ? $1 : ''; }

# The path of TO relative to the directory FROMDIR (both relative to the doc root).
sub relative {
    my ($fromdir, $to) = @_;
    my @f = grep { $_ ne '' } split m{/}, $fromdir;
    my @t = split m{/}, $to;
    while (@f && @t > 1 && $f[0] eq $t[0]) { shift @f; shift @t; }
    return join '/', ('..') x @f, @t;
}

sub rewrite {
    my ($src, $target) = @_;
    return $target if $target =~ m{^[a-z][a-z0-9+.-]*:}i || $target =~ /^#/ || $target eq '';
    my ($path, $anchor) = $target =~ /^([^#]*)(#.*)?$/;
    $anchor //= '';
    my $repo = normalize(dirname($src) . '/' . $path);
    die "$src: link $target leaves the repository\n" unless defined $repo;
    return relative(dirname($dest{$src}), $dest{$repo}) . $anchor if exists $dest{$repo};
    return "$url/$repo$anchor";
}

for my $src (sort keys %dest) {
    my $out = "$outdir/$dest{$src}";
    (my $dir = $out) =~ s{/[^/]*$}{};
    system('mkdir', '-p', $dir) == 0 or die "mkdir -p $dir failed\n";
    open my $in, '<', $src or die "$src: $!\n";
    open my $fh, '>', $out or die "$out: $!\n";
    my $fence = 0;
    while (my $line = <$in>) {
        if ($line =~ /^\s*```/) { $fence = !$fence; print $fh $line; next; }
        if ($fence) { print $fh $line; next; }
        # Even pieces are outside `code spans`.
        my @piece = split /(`[^`]*`)/, $line, -1;
        for my $i (0 .. $#piece) {
            next if $piece[$i] =~ /^`/;
            $piece[$i] =~ s/\]\(([^)\s]*)\)/'](' . rewrite($src, $1) . ')'/ge;
        }
        print $fh join '', @piece;
    }
    close $fh or die "$out: $!\n";
}
