#!/usr/bin/perl
# Copies the Markdown files the packages ship into OUTDIR, with every repository-relative link
# rewritten so that it works where the copy is read (/usr/share/doc/nthd, the tarball):
#   - a link to a file that is shipped too points at the shipped copy (relative to the copy);
#   - any other link (CHANGELOG.md, LICENSE, bench/, tests/e2e/, ...) points at that file
#     where this version's source is published, URL/PATH (URL as packaging/build.sh is given it,
#     NTHD_DOCS_URL); with no URL (an empty argument) the link becomes plain text that names
#     the path in nthd's source: "the changelog (in nthd's source: CHANGELOG.md)", or
#     "CHANGELOG.md in nthd's source" when the link's text is the path.
# Links in code (fences, `spans`), absolute URLs and same-page anchors are left alone.
#
# usage: perl packaging/doclinks.pl URL OUTDIR SRC=DEST...
#   SRC is a repository path (README.md, docs/install.md), DEST its path under OUTDIR and
#   under the installed doc directory (README.md, docs/install.md, README.packaging.md). A SRC
#   that is not Markdown (docs/timeline.svg) is copied as it is.
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
    return "$url/$repo$anchor" if $url ne '';
    return undef;
}

# The `code spans` of the line being rewritten; the line holds \0N\0 in their place.
my @span;

# One link [TEXT](TARGET): rewritten, or TEXT naming the path when it has nowhere to point.
sub one_link {
    my ($src, $text, $target) = @_;
    my $to = rewrite($src, $target);
    return "[$text]($to)" if defined $to;
    my ($path) = $target =~ /^([^#]*)/;
    my $repo = normalize(dirname($src) . '/' . $path);
    (my $plain = $text) =~ s/\0(\d+)\0/$span[$1]/g;
    $plain =~ s/`//g;
    return "$text in nthd's source" if $plain eq $repo || $plain eq $path;
    return "$text (in nthd's source: `$repo`)";
}

for my $src (sort keys %dest) {
    my $out = "$outdir/$dest{$src}";
    (my $dir = $out) =~ s{/[^/]*$}{};
    system('mkdir', '-p', $dir) == 0 or die "mkdir -p $dir failed\n";
    if ($src !~ /\.md$/) {
        system('cp', $src, $out) == 0 or die "cp $src $out failed\n";
        next;
    }
    open my $in, '<', $src or die "$src: $!\n";
    open my $fh, '>', $out or die "$out: $!\n";
    my $fence = 0;
    while (my $line = <$in>) {
        if ($line =~ /^\s*```/) { $fence = !$fence; print $fh $line; next; }
        if ($fence) { print $fh $line; next; }
        # `Code spans` are set aside as \0N\0 while the links around them are rewritten.
        @span = ();
        $line =~ s/(`[^`]*`)/push @span, $1; "\0$#span\0"/ge;
        $line =~ s/\[([^\[\]]*)\]\(([^)\s]*)\)/one_link($src, $1, $2)/ge;
        $line =~ s/\0(\d+)\0/$span[$1]/g;
        print $fh $line;
    }
    close $fh or die "$out: $!\n";
}
