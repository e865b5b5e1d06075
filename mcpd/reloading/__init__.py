"""A reload before and after the wiring puts it in force: the config file read again and
judged before anything of the daemon changes (``reread``), and whether what runs is then
what the file says (``outcome``)."""
