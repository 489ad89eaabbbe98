# python3's sqlite3 (fcntl record locks underneath), run by run.rs's
# `file_locks_match_linux` natively and under `uvfs run`: create, insert, read back; an
# exclusive transaction locks out a second connection until it ends. argv[1]: a directory.
import sqlite3, os, sys
d = sys.argv[1]
con = sqlite3.connect(d + '/t.db')
con.execute('create table t (k integer primary key, v text)')
con.executemany('insert into t (v) values (?)', [('a%d' % i,) for i in range(100)])
con.commit()
print(con.execute('select count(*), min(v), max(v) from t').fetchone())
con2 = sqlite3.connect(d + '/t.db', timeout=0)
con.execute('begin exclusive')
try:
    con2.execute('insert into t (v) values (1)'); print('no lock!')
except sqlite3.OperationalError as e: print('locked:', e)
con.rollback()
con2.execute('insert into t (v) values (1)'); con2.commit()
print(con.execute('select count(*) from t').fetchone())
