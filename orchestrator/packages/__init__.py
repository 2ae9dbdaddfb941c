"""External packages: git repositories the user installs as they are, checked before anything reads
them, whose skills join the untrusted tier and whose commands get shims on the sandbox's PATH.

places.py: the folders and the registry file; registry.py: what is kept of each package; source.py: which
addresses may be cloned; git.py: git run as if every repository were hostile; tree.py: the checks of a
commit's tree and what kind of package it is; deps.py: the dependency step, asked once and remembered;
shims.py: the commands' shims; lifecycle.py: add, update, enable, disable, remove.
"""
