"""What people read: text from servers with what would act on a terminal escaped, values
a sentence must not show written as their stand-ins, a server's URL without its
credentials, and the fields a log record carries."""
