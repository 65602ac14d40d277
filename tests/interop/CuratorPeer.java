/*
 * CuratorPeer: a line-oriented command server that runs Apache Curator 5.4 recipes, so
 * Python tests can put a real Curator client on the same znodes as zk_recipes.
 *
 * Design note
 * -----------
 * Start:  java -cp <curator jars>:<dir> CuratorPeer <connectString> [sessionTimeoutMs]
 * (the jars include curator-x-discovery and Jackson; <dir> also holds the extra Java sources
 * under java/ compiled alongside, e.g. a stand-in for Spring Cloud's payload class)
 * The peer builds one CuratorFramework (ExponentialBackoffRetry(100, 5), connection timeout =
 * session timeout, default 4000 ms), waits until connected and prints READY (or "ERR ..." and
 * exits 2). Then it reads one command per line from stdin and writes exactly one reply line,
 * "OK", "OK <payload>" or "ERR <message>". Asynchronous notifications are extra lines starting
 * with "EVENT " and may come at any time, between or before replies. stdin EOF = quit.
 * Nothing a command does ends the program except quit/EOF: every command's exception becomes
 * an ERR reply. The original stdout carries only protocol lines (System.out is re-pointed at
 * stderr so that stray library prints cannot corrupt the stream).
 *
 * Recipe instances are named by handles (letters, digits, "_", "-", no dots). Paths are
 * absolute ZooKeeper paths (the client has no namespace). Lock-like handles own a worker
 * thread: InterProcessMutex is re-entrant per Java thread and must be released by the thread
 * that took it, so every acquire/release of a handle runs on that handle's thread. A read-write
 * lock's halves, NAME.read and NAME.write, share NAME's thread, so write -> read downgrade works.
 *
 * Creating recipes (reply OK):
 *   mutex NAME PATH                  InterProcessMutex
 *   rwlock NAME PATH                 InterProcessReadWriteLock -> handles NAME.read, NAME.write
 *   semaphore NAME PATH MAXLEASES    InterProcessSemaphoreV2
 *   semmutex NAME PATH               InterProcessSemaphoreMutex
 *   latch NAME PATH [ID]             LeaderLatch, started (EVENT NAME isLeader|notLeader)
 *   selector NAME PATH [ID]          LeaderSelector, autoRequeue, started (see yield)
 *   sharedcount NAME PATH SEED       SharedCount, started (EVENT NAME changed <int>)
 *   atomiclong NAME PATH             DistributedAtomicLong, RetryNTimes(10, 10)
 * Locks (mutex, NAME.read, NAME.write, semaphore, semmutex):
 *   acquire NAME                     -> OK pending; later EVENT NAME acquired <path...>,
 *                                       EVENT NAME cancelled or EVENT NAME error <message>
 *   acquire NAME TIMEOUTMS [QTY]     -> OK acquired <path...> | OK timeout (synchronous;
 *                                       TIMEOUTMS "-" = blocking, answered like the first form;
 *                                       QTY only for semaphores)
 *   release NAME [LEASEPATH]         -> OK (semaphore: all its leases, or the one given)
 *   cancel NAME                      -> OK cancelled | OK idle (interrupts a pending acquire)
 *   participants NAME                -> OK <full node paths, in Curator's order>: a mutex's
 *                                       getParticipantNodes(); NAME.read / NAME.write: Curator's
 *                                       list for that half (own token only); rwlock NAME: every
 *                                       child of the directory; semaphores: the lease nodes
 *   isacquired NAME                  -> OK true|false (isAcquiredInThisProcess / holds leases)
 *   A handle whose thread is still in a pending acquire answers other acquire/release with
 *   "ERR busy ..." (the same Java thread could not do them either); participants still works.
 *   <path> is the node this acquire holds: for a re-entrant mutex the same node again; "-" if
 *   Curator did not reveal it.
 * Leadership:
 *   hasleadership NAME               -> OK true|false   (latch or selector)
 *   participants NAME                -> OK <id>:<true|false> ... in node order (latch, selector)
 *   ourpath NAME                     -> OK <path>|OK -  (latch)
 *   await NAME TIMEOUTMS             -> OK true|false   (latch)
 *   yield NAME                       -> OK (selector: takeLeadership returns; ERR if not leading)
 *   selector events: EVENT NAME leading, EVENT NAME yielded, EVENT NAME interrupted
 * Counters:
 *   get NAME                         -> OK <int>        (sharedcount, atomiclong)
 *   set NAME VALUE                   -> OK              (setCount / forceSet)
 *   trysetcount NAME EXPECTED NEW    -> OK true|false   (false if the cached value != EXPECTED,
 *                                       else trySetCount(getVersionedValue(), NEW))
 *   versioned NAME                   -> OK <value> <version>   (sharedcount, cached)
 *   add NAME DELTA                   -> OK <succeeded> <pre> <post>   (atomiclong)
 *   cas NAME EXPECTED NEW            -> OK <succeeded> <pre> <post>   (atomiclong)
 * Caches:
 *   cache NAME PATH                  CuratorCache (recursive), started (EVENT NAME initialized)
 *   cachedump NAME                   -> OK <path>=<hex data>:<mzxid hex> ... sorted by path
 * Service discovery (curator-x-discovery). Instances travel as the bytes of Curator's default
 * JsonInstanceSerializer(Object.class) (compatible mode: no "enabled" key), hex-encoded, so
 * JSON with spaces never splits an argument. A payload whose JSON object names its Java class
 * ("@class") is read as that class: it must be on the classpath (java.util.*, and the stand-in
 * Spring Cloud ZookeeperInstance compiled with this peer). SERVICE and ID contain no spaces.
 *   discovery NAME BASEPATH          ServiceDiscovery<Object>, started
 *   register NAME HEXJSON            registerService(deserialize(HEXJSON))
 *   update NAME HEXJSON              updateService(...) (an instance this discovery registered)
 *   unregister NAME SERVICE ID       unregisterService (Curator finds its own registration by
 *                                       ID; an instance it did not register is left alone)
 *   query NAME SERVICE               -> OK <hex instance> ... queryForInstances, in id order
 *   instance NAME SERVICE ID         -> OK <hex instance>|OK -   queryForInstance
 *   names NAME                       -> OK <service names, sorted>   queryForNames
 *   reserialize HEXJSON              -> OK <hex>: a fresh serializer's deserialize + serialize
 *   servicecache NAME DISCOVERY SERVICE   ServiceCache, started (initial load in);
 *                                       EVENT NAME changed on each cacheChanged
 *   cacheids NAME                    -> OK <ids of getInstances(), sorted>
 *   provider NAME DISCOVERY SERVICE roundrobin|random|sticky
 *                                    ServiceProvider, started (sticky = Sticky over round robin)
 *   pick NAME                        -> OK <id of getInstance()>|OK -  (none)
 *   Closing a discovery closes (and forgets) the caches and providers made from it first,
 *   then the discovery, which deletes the instances it registered.
 * Queues (curator-recipes QueueBuilder, with a byte-identity QueueSerializer<byte[]>). Items
 * travel as hex; an item argument "-" is zero bytes (in replies and events zero bytes are an
 * empty payload). Puts wait for the write (putInBackground(false)): OK means the node exists.
 *   queue NAME KIND PATH [LOCKPATH|-] [noconsumer]
 *                                    KIND plain|priority|delay|id: buildQueue(),
 *                                       buildPriorityQueue(0), buildDelayQueue(), buildIdQueue()
 *                                       (with lockPath(LOCKPATH) unless "-"), started. The
 *                                       consumer sends EVENT NAME item <hex> per item consumed
 *                                       and, registered as a connection listener (the queues do
 *                                       not register it), EVENT NAME state <STATE>;
 *                                       noconsumer: a producer-only queue (consumer null)
 *   qput NAME HEX [ARG]              put(item) (plain), put(item, int priority) (priority),
 *                                       put(item, long delayUntilEpochMs) (delay),
 *                                       put(item, String itemId) (id)
 *   qputmulti NAME HEX [HEX ...]     putMulti(MultiItem of the items): one node (plain only)
 *   qremove NAME ID                  -> OK <count>  remove(ID) (id queue; Curator compares ID with
 *                                       the node's fixed id: "/" and "|" became "_")
 *   simple NAME PATH                 SimpleDistributedQueue
 *   soffer NAME HEX                  -> OK         offer(item)
 *   stake NAME TIMEOUTMS             -> OK <hex>|OK -  poll(TIMEOUTMS, MILLISECONDS); "-" = none
 *   close NAME closes a queue (a simple queue has nothing to close).
 * Any handle:
 *   close NAME [SILENT|NOTIFY_LEADER] -> OK: releases what a lock holds, closes the recipe,
 *                                       forgets the handle (the close mode is for latches)
 * Client:
 *   getdata PATH -> OK <lower-case hex>   children PATH -> OK <names, sorted>
 *   session -> OK <session id hex>       ping -> OK      closeclient -> OK     quit -> OK, exit
 * Benchmark (benchmarks/locks.py, Curator's absolute time beside ours):
 *   cycles PATH COUNT [WARMUP]       -> OK <cpu_ns> <ns> <ns> ...: WARMUP untimed, then COUNT
 *                                       timed acquire()+release() of one InterProcessMutex on
 *                                       PATH, on the command thread; each cycle's wall time, and
 *                                       the JVM's CPU time over the timed cycles (all threads)
 *   threads PATH THREADS MILLIS      -> OK <cycles> <elapsed_ns> <cpu_ns>: THREADS threads, an
 *                                       InterProcessMutex each on PATH (one client), each
 *                                       cycling acquire()+release() until MILLIS have passed
 *   Connection states are reported as EVENT @client <STATE> (CONNECTED, SUSPENDED, ...).
 */

import java.io.BufferedReader;
import java.io.FileDescriptor;
import java.io.FileOutputStream;
import java.io.InputStreamReader;
import java.io.PrintStream;
import java.lang.reflect.Field;
import java.lang.reflect.Method;
import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.Collection;
import java.util.Comparator;
import java.util.HashMap;
import java.util.Iterator;
import java.util.List;
import java.util.Map;
import java.util.concurrent.Callable;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.LinkedBlockingQueue;
import java.util.concurrent.Semaphore;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.TimeoutException;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.regex.Pattern;

import org.apache.curator.framework.CuratorFramework;
import org.apache.curator.framework.CuratorFrameworkFactory;
import org.apache.curator.framework.recipes.atomic.AtomicValue;
import org.apache.curator.framework.recipes.atomic.DistributedAtomicLong;
import org.apache.curator.framework.recipes.cache.ChildData;
import org.apache.curator.framework.recipes.cache.CuratorCache;
import org.apache.curator.framework.recipes.cache.CuratorCacheListener;
import org.apache.curator.framework.recipes.leader.LeaderLatch;
import org.apache.curator.framework.recipes.leader.LeaderLatchListener;
import org.apache.curator.framework.recipes.leader.LeaderSelector;
import org.apache.curator.framework.recipes.leader.LeaderSelectorListenerAdapter;
import org.apache.curator.framework.recipes.leader.Participant;
import org.apache.curator.framework.recipes.locks.InterProcessMutex;
import org.apache.curator.framework.recipes.locks.InterProcessReadWriteLock;
import org.apache.curator.framework.recipes.locks.InterProcessSemaphoreMutex;
import org.apache.curator.framework.recipes.locks.InterProcessSemaphoreV2;
import org.apache.curator.framework.recipes.locks.Lease;
import org.apache.curator.framework.recipes.locks.StandardLockInternalsDriver;
import org.apache.curator.framework.recipes.queue.DistributedDelayQueue;
import org.apache.curator.framework.recipes.queue.DistributedIdQueue;
import org.apache.curator.framework.recipes.queue.DistributedPriorityQueue;
import org.apache.curator.framework.recipes.queue.DistributedQueue;
import org.apache.curator.framework.recipes.queue.QueueBase;
import org.apache.curator.framework.recipes.queue.QueueBuilder;
import org.apache.curator.framework.recipes.queue.QueueConsumer;
import org.apache.curator.framework.recipes.queue.QueueSerializer;
import org.apache.curator.framework.recipes.queue.SimpleDistributedQueue;
import org.apache.curator.framework.recipes.shared.SharedCount;
import org.apache.curator.framework.recipes.shared.SharedCountListener;
import org.apache.curator.framework.recipes.shared.SharedCountReader;
import org.apache.curator.framework.recipes.shared.VersionedValue;
import org.apache.curator.framework.state.ConnectionState;
import org.apache.curator.retry.ExponentialBackoffRetry;
import org.apache.curator.retry.RetryNTimes;
import org.apache.curator.utils.ZKPaths;
import org.apache.curator.x.discovery.ProviderStrategy;
import org.apache.curator.x.discovery.ServiceCache;
import org.apache.curator.x.discovery.ServiceDiscovery;
import org.apache.curator.x.discovery.ServiceDiscoveryBuilder;
import org.apache.curator.x.discovery.ServiceInstance;
import org.apache.curator.x.discovery.ServiceProvider;
import org.apache.curator.x.discovery.ServiceType;
import org.apache.curator.x.discovery.details.JsonInstanceSerializer;
import org.apache.curator.x.discovery.details.ServiceCacheListener;
import org.apache.curator.x.discovery.strategies.RandomStrategy;
import org.apache.curator.x.discovery.strategies.RoundRobinStrategy;
import org.apache.curator.x.discovery.strategies.StickyStrategy;

public final class CuratorPeer {
    /** Upper bound for a synchronous step on a handle's thread beyond its own timeout. */
    private static final long GRACE_MS = 30_000;
    private static final Pattern HANDLE = Pattern.compile("[A-Za-z0-9_-]+");

    private static PrintStream protocol;
    private static CuratorFramework client;
    private static final Map<String, Handle> handles = new HashMap<>();

    // -- output -------------------------------------------------------------------------------

    static void emit(String line) {
        String clean = line.replace('\r', ' ').replace('\n', ' ');
        synchronized (CuratorPeer.class) {
            protocol.print(clean + "\n");
            protocol.flush();
        }
    }

    static void event(String handle, String what) {
        emit("EVENT " + handle + " " + what);
    }

    /** A mistake in the command itself: reported as "ERR <message>" without a class name. */
    static final class CommandError extends Exception {
        private static final long serialVersionUID = 1L;

        CommandError(String message) {
            super(message);
        }
    }

    static String describe(Throwable t) {
        if (t instanceof CommandError) {
            return t.getMessage();
        }
        String message = t.getMessage();
        return t.getClass().getSimpleName() + (message == null ? "" : ": " + message);
    }

    static boolean wasInterrupted(Throwable t) {
        if (Thread.currentThread().isInterrupted()) {
            return true;
        }
        for (Throwable c = t; c != null; c = c.getCause()) {
            if (c instanceof InterruptedException) {
                return true;
            }
        }
        return false;
    }

    // -- worker threads -----------------------------------------------------------------------

    /** One Java thread per lock handle; tasks never escape it, so the thread lives on. */
    static final class Worker {
        private final LinkedBlockingQueue<Runnable> queue = new LinkedBlockingQueue<>();
        private final AtomicInteger inFlight = new AtomicInteger();
        private final Thread thread;
        private volatile boolean stopping;

        Worker(String name) {
            thread = new Thread(this::loop, "peer-" + name);
            thread.setDaemon(true);
            thread.start();
        }

        private void loop() {
            while (!stopping) {
                Runnable task;
                try {
                    task = queue.take();
                } catch (InterruptedException e) {
                    continue;
                }
                try {
                    task.run();
                } catch (Throwable ignored) {
                    // tasks complete their own futures; nothing may kill this thread
                }
            }
        }

        boolean busy() {
            return inFlight.get() > 0;
        }

        /** The handle counts as idle again before the future completes (and before any
         *  callback on it emits an EVENT), so a command reacting to the result never sees
         *  "busy". */
        <T> CompletableFuture<T> submit(Callable<T> body) {
            CompletableFuture<T> future = new CompletableFuture<>();
            inFlight.incrementAndGet();
            queue.add(() -> {
                T result = null;
                Throwable failure = null;
                try {
                    result = body.call();
                } catch (Throwable t) {
                    failure = t;
                } finally {
                    Thread.interrupted(); // a cancel that came too late must not hit the next task
                    inFlight.decrementAndGet();
                }
                if (failure == null) {
                    future.complete(result);
                } else {
                    future.completeExceptionally(failure);
                }
            });
            return future;
        }

        void requireIdle() throws CommandError {
            if (busy()) {
                throw new CommandError("busy: an acquire is pending on this handle's thread "
                        + "(wait for its EVENT or send cancel)");
            }
        }

        <T> T call(Callable<T> body, long waitMs) throws Exception {
            requireIdle();
            CompletableFuture<T> future = submit(body);
            try {
                return future.get(waitMs, TimeUnit.MILLISECONDS);
            } catch (ExecutionException e) {
                Throwable cause = e.getCause();
                if (cause instanceof Exception) {
                    throw (Exception) cause;
                }
                throw new RuntimeException(cause);
            } catch (TimeoutException e) {
                throw new CommandError("no result within " + waitMs
                        + " ms; the step still runs on the handle's thread");
            }
        }

        boolean cancel() {
            if (!busy()) {
                return false;
            }
            thread.interrupt();
            return true;
        }

        void awaitIdle(long waitMs) throws InterruptedException {
            long deadline = System.nanoTime() + TimeUnit.MILLISECONDS.toNanos(waitMs);
            while (busy() && System.nanoTime() < deadline) {
                Thread.sleep(10);
            }
        }

        void stop() {
            stopping = true;
            thread.interrupt();
        }
    }

    // -- handles ------------------------------------------------------------------------------

    abstract static class Handle {
        final String name;

        Handle(String name) {
            this.name = name;
        }

        abstract void close(String mode) throws Exception;
    }

    /** The lock operations, always called on the owning worker thread (participants aside). */
    interface Lockish {
        /** timeoutMs < 0 waits forever; returns the held node paths, or null on timeout. */
        String acquire(long timeoutMs, int qty) throws Exception;

        void release(String leasePath) throws Exception;

        /** Undo everything this handle holds (used by close). */
        void releaseAll() throws Exception;

        List<String> participants() throws Exception;

        boolean isAcquired();
    }

    static Method lockPathMethod;

    /** InterProcessMutex keeps the holder's node in per-thread LockData; 5.4 exposes it only
     *  through the protected getLockPath(), read for the calling (worker) thread. */
    static String lockPathOf(InterProcessMutex mutex) {
        try {
            if (lockPathMethod == null) {
                Method m = InterProcessMutex.class.getDeclaredMethod("getLockPath");
                m.setAccessible(true);
                lockPathMethod = m;
            }
            Object path = lockPathMethod.invoke(mutex);
            return path == null ? "-" : path.toString();
        } catch (ReflectiveOperationException | RuntimeException e) {
            return "-";
        }
    }

    static void requireQty1(int qty) throws CommandError {
        if (qty != 1) {
            throw new CommandError("QTY is only for semaphores");
        }
    }

    static final class MutexLock implements Lockish {
        private final InterProcessMutex mutex;

        MutexLock(InterProcessMutex mutex) {
            this.mutex = mutex;
        }

        public String acquire(long timeoutMs, int qty) throws Exception {
            requireQty1(qty);
            if (timeoutMs < 0) {
                mutex.acquire();
            } else if (!mutex.acquire(timeoutMs, TimeUnit.MILLISECONDS)) {
                return null;
            }
            return lockPathOf(mutex);
        }

        public void release(String leasePath) throws Exception {
            if (leasePath != null) {
                throw new CommandError("release of a lock takes no path");
            }
            mutex.release();
        }

        public void releaseAll() throws Exception {
            while (mutex.isOwnedByCurrentThread()) {
                mutex.release();
            }
        }

        public List<String> participants() throws Exception {
            return new ArrayList<>(mutex.getParticipantNodes());
        }

        public boolean isAcquired() {
            return mutex.isAcquiredInThisProcess();
        }
    }

    /** Lease children of a semaphore directory as full paths, ordered by sequence number. */
    static List<String> leasePaths(String semaphorePath) throws Exception {
        String leases = ZKPaths.makePath(semaphorePath, "leases");
        List<String> names;
        try {
            names = new ArrayList<>(client.getChildren().forPath(leases));
        } catch (org.apache.zookeeper.KeeperException.NoNodeException e) {
            names = new ArrayList<>();
        }
        names.sort(Comparator.comparing(
                (String n) -> StandardLockInternalsDriver.standardFixForSorting(n, "lease-")));
        List<String> paths = new ArrayList<>();
        for (String n : names) {
            paths.add(ZKPaths.makePath(leases, n));
        }
        return paths;
    }

    /** Lease.getNodeName() is the bare child name in 5.4; the protocol speaks full paths. */
    static String leaseFullPath(String semaphorePath, String nodeName) {
        return nodeName.startsWith("/") ? nodeName
                : ZKPaths.makePath(ZKPaths.makePath(semaphorePath, "leases"), nodeName);
    }

    static final class SemaphoreLock implements Lockish {
        private final InterProcessSemaphoreV2 semaphore;
        private final String path;
        private final List<Lease> leases = new ArrayList<>();

        SemaphoreLock(InterProcessSemaphoreV2 semaphore, String path) {
            this.semaphore = semaphore;
            this.path = path;
        }

        public String acquire(long timeoutMs, int qty) throws Exception {
            Collection<Lease> got = timeoutMs < 0
                    ? semaphore.acquire(qty)
                    : semaphore.acquire(qty, timeoutMs, TimeUnit.MILLISECONDS);
            if (got == null) {
                return null;
            }
            List<String> names = new ArrayList<>();
            for (Lease lease : got) {
                leases.add(lease);
                names.add(leaseFullPath(path, lease.getNodeName()));
            }
            return String.join(" ", names);
        }

        public void release(String leasePath) throws Exception {
            if (leases.isEmpty()) {
                throw new CommandError("this semaphore handle holds no lease");
            }
            if (leasePath == null) {
                releaseAll();
                return;
            }
            for (Iterator<Lease> it = leases.iterator(); it.hasNext(); ) {
                Lease lease = it.next();
                if (leasePath.equals(leaseFullPath(path, lease.getNodeName()))) {
                    it.remove();
                    semaphore.returnLease(lease);
                    return;
                }
            }
            throw new CommandError("this semaphore handle holds no lease " + leasePath);
        }

        public void releaseAll() {
            List<Lease> held = new ArrayList<>(leases);
            leases.clear();
            semaphore.returnAll(held);
        }

        public List<String> participants() throws Exception {
            return leasePaths(path);
        }

        public boolean isAcquired() {
            return !leases.isEmpty();
        }
    }

    static final class SemMutexLock implements Lockish {
        private final InterProcessSemaphoreMutex mutex;
        private final String path;

        SemMutexLock(InterProcessSemaphoreMutex mutex, String path) {
            this.mutex = mutex;
            this.path = path;
        }

        /** 5.4 keeps the lease in a private field and has no getter. */
        private String leasePath() {
            try {
                Field f = InterProcessSemaphoreMutex.class.getDeclaredField("lease");
                f.setAccessible(true);
                Lease lease = (Lease) f.get(mutex);
                return lease == null ? "-" : leaseFullPath(path, lease.getNodeName());
            } catch (ReflectiveOperationException | RuntimeException e) {
                return "-";
            }
        }

        public String acquire(long timeoutMs, int qty) throws Exception {
            requireQty1(qty);
            if (timeoutMs < 0) {
                mutex.acquire();
            } else if (!mutex.acquire(timeoutMs, TimeUnit.MILLISECONDS)) {
                return null;
            }
            return leasePath();
        }

        public void release(String leasePath) throws Exception {
            if (leasePath != null) {
                throw new CommandError("release of a lock takes no path");
            }
            mutex.release();
        }

        public void releaseAll() throws Exception {
            if (mutex.isAcquiredInThisProcess()) {
                mutex.release();
            }
        }

        public List<String> participants() throws Exception {
            return leasePaths(path);
        }

        public boolean isAcquired() {
            return mutex.isAcquiredInThisProcess();
        }
    }

    /** mutex, semaphore, semmutex (one lock) or rwlock (two halves) on one worker thread. */
    static final class LockHandle extends Handle {
        final String path;
        final Worker worker;
        final Map<String, Lockish> parts = new HashMap<>();

        LockHandle(String name, String path) {
            super(name);
            this.path = path;
            worker = new Worker(name);
        }

        void close(String mode) throws Exception {
            try {
                if (worker.cancel()) {
                    worker.awaitIdle(GRACE_MS);
                }
                worker.call(() -> {
                    for (Lockish lock : parts.values()) {
                        lock.releaseAll();
                    }
                    return null;
                }, GRACE_MS);
            } finally {
                worker.stop();
            }
        }
    }

    static final class LatchHandle extends Handle {
        final LeaderLatch latch;

        LatchHandle(String name, String path, String id) throws Exception {
            super(name);
            latch = new LeaderLatch(client, path, id);
            latch.addListener(new LeaderLatchListener() {
                public void isLeader() {
                    event(name, "isLeader");
                }

                public void notLeader() {
                    event(name, "notLeader");
                }
            });
            latch.start();
        }

        void close(String mode) throws Exception {
            latch.close(mode == null ? LeaderLatch.CloseMode.SILENT
                    : LeaderLatch.CloseMode.valueOf(mode));
        }
    }

    static final class SelectorHandle extends Handle {
        final LeaderSelector selector;
        final Semaphore yields = new Semaphore(0);
        volatile boolean leading;

        SelectorHandle(String name, String path, String id) {
            super(name);
            selector = new LeaderSelector(client, path, new LeaderSelectorListenerAdapter() {
                public void takeLeadership(CuratorFramework c) throws Exception {
                    yields.drainPermits();
                    leading = true;
                    event(name, "leading");
                    try {
                        yields.acquire();
                        event(name, "yielded");
                    } catch (InterruptedException e) {
                        event(name, "interrupted");
                        throw e;
                    } finally {
                        leading = false;
                    }
                }
            });
            if (!id.isEmpty()) {
                selector.setId(id);
            }
            selector.autoRequeue();
            selector.start();
        }

        void yieldLeadership() throws CommandError {
            if (!leading) {
                throw new CommandError("not leading: " + name);
            }
            yields.release();
        }

        void close(String mode) {
            selector.close();
        }
    }

    static final class CountHandle extends Handle {
        final SharedCount count;

        CountHandle(String name, String path, int seed) throws Exception {
            super(name);
            count = new SharedCount(client, path, seed);
            count.addListener(new SharedCountListener() {
                public void countHasChanged(SharedCountReader reader, int value) {
                    event(name, "changed " + value);
                }

                public void stateChanged(CuratorFramework c, ConnectionState state) {
                }
            });
            count.start();
        }

        void close(String mode) throws Exception {
            count.close();
        }
    }

    static final class CacheHandle extends Handle {
        final CuratorCache cache;

        CacheHandle(String name, String path) {
            super(name);
            cache = CuratorCache.build(client, path);
            cache.listenable().addListener(
                    CuratorCacheListener.builder().forInitialized(() -> event(name, "initialized")).build());
            cache.start();
        }

        String dump() {
            List<String> parts = new ArrayList<>();
            cache.stream()
                    .sorted(Comparator.comparing(ChildData::getPath))
                    .forEach(d -> parts.add(d.getPath() + "=" + hex(d.getData() == null ? new byte[0] : d.getData())
                            + ":" + Long.toHexString(d.getStat().getMzxid())));
            return String.join(" ", parts);
        }

        void close(String mode) {
            cache.close();
        }
    }

    static final class AtomicHandle extends Handle {
        final DistributedAtomicLong value;

        AtomicHandle(String name, String path) {
            super(name);
            value = new DistributedAtomicLong(client, path, new RetryNTimes(10, 10));
        }

        void close(String mode) {
        }
    }

    // -- service discovery (curator-x-discovery) ---------------------------------------------

    /** Curator's default serializer: payloads of any class Jackson can resolve from "@class"
     *  (scalars need none), written in compatible mode (no "enabled" key). */
    static JsonInstanceSerializer<Object> newSerializer() {
        return new JsonInstanceSerializer<>(Object.class);
    }

    static final class DiscoveryHandle extends Handle {
        final JsonInstanceSerializer<Object> serializer = newSerializer();
        final ServiceDiscovery<Object> discovery;
        /** Caches and providers built from this discovery: its close closes them first. */
        final List<Handle> dependents = new ArrayList<>();

        DiscoveryHandle(String name, String basePath) throws Exception {
            super(name);
            discovery = ServiceDiscoveryBuilder.builder(Object.class)
                    .client(client)
                    .basePath(basePath)
                    .serializer(serializer)
                    .build();
            discovery.start();
        }

        /** Serialized instances in id order, each as lower-case hex, space-separated. */
        String hexInstances(Collection<ServiceInstance<Object>> instances) throws Exception {
            List<ServiceInstance<Object>> sorted = new ArrayList<>(instances);
            sorted.sort(Comparator.comparing(ServiceInstance::getId));
            List<String> out = new ArrayList<>();
            for (ServiceInstance<Object> instance : sorted) {
                out.add(hex(serializer.serialize(instance)));
            }
            return String.join(" ", out);
        }

        void close(String mode) throws Exception {
            try {
                for (Handle dependent : dependents) {
                    if (handles.get(dependent.name) == dependent) {
                        handles.remove(dependent.name);
                        dependent.close(null);
                    }
                }
            } finally {
                dependents.clear();
                discovery.close(); // deletes what it registered
            }
        }
    }

    static final class ServiceCacheHandle extends Handle {
        final ServiceCache<Object> cache;

        ServiceCacheHandle(String name, DiscoveryHandle owner, String service) throws Exception {
            super(name);
            cache = owner.discovery.serviceCacheBuilder().name(service).build();
            cache.addListener(new ServiceCacheListener() {
                public void cacheChanged() {
                    event(name, "changed");
                }

                public void stateChanged(CuratorFramework c, ConnectionState state) {
                }
            });
            cache.start(); // returns once the initial load is in
            owner.dependents.add(this);
        }

        void close(String mode) throws Exception {
            cache.close();
        }
    }

    static final class ProviderHandle extends Handle {
        final ServiceProvider<Object> provider;

        ProviderHandle(String name, DiscoveryHandle owner, String service, String strategy)
                throws Exception {
            super(name);
            ProviderStrategy<Object> chosen;
            switch (strategy) {
                case "roundrobin":
                    chosen = new RoundRobinStrategy<>();
                    break;
                case "random":
                    chosen = new RandomStrategy<>();
                    break;
                case "sticky":
                    chosen = new StickyStrategy<>(new RoundRobinStrategy<>());
                    break;
                default:
                    throw new CommandError("strategy must be roundrobin, random or sticky");
            }
            provider = owner.discovery.serviceProviderBuilder()
                    .serviceName(service)
                    .providerStrategy(chosen)
                    .build();
            provider.start();
            owner.dependents.add(this);
        }

        void close(String mode) throws Exception {
            provider.close();
        }
    }

    // -- queues (QueueBuilder's four queues, SimpleDistributedQueue) ----------------------------

    /** Items are bytes as they are: the protocol carries them as hex. */
    static final QueueSerializer<byte[]> IDENTITY = new QueueSerializer<byte[]>() {
        public byte[] serialize(byte[] item) {
            return item;
        }

        public byte[] deserialize(byte[] bytes) {
            return bytes;
        }
    };

    /** An item argument: hex, or "-" for zero bytes (an empty argument cannot be written). */
    static byte[] itemBytes(String arg) throws CommandError {
        return arg.equals("-") ? new byte[0] : unhex(arg);
    }

    static final class QueueHandle extends Handle {
        final String kind;
        final QueueBase<byte[]> queue;
        final QueueConsumer<byte[]> consumer;

        QueueHandle(String name, String kind, String path, String lockPath, boolean consume)
                throws Exception {
            super(name);
            this.kind = kind;
            consumer = !consume ? null : new QueueConsumer<byte[]>() {
                public void consumeMessage(byte[] item) {
                    event(name, "item " + hex(item));
                }

                public void stateChanged(CuratorFramework c, ConnectionState state) {
                    event(name, "state " + state.name());
                }
            };
            // putInBackground(false): a put returns once its node exists, so OK means written.
            QueueBuilder<byte[]> builder =
                    QueueBuilder.builder(client, consumer, IDENTITY, path).putInBackground(false);
            if (lockPath != null) {
                builder.lockPath(lockPath);
            }
            switch (kind) {
                case "plain":
                    queue = builder.buildQueue();
                    break;
                case "priority":
                    queue = builder.buildPriorityQueue(0);
                    break;
                case "delay":
                    queue = builder.buildDelayQueue();
                    break;
                case "id":
                    queue = builder.buildIdQueue();
                    break;
                default:
                    throw new CommandError("queue KIND must be plain, priority, delay or id");
            }
            queue.start();
            // The queues never tell their consumer of connection states: the application
            // registers it, as Curator's documentation asks.
            if (consumer != null) {
                client.getConnectionStateListenable().addListener(consumer);
            }
        }

        void put(byte[] item, String arg) throws Exception {
            if (kind.equals("plain") != (arg == null)) {
                throw new CommandError(kind.equals("plain") ? "a plain queue's put takes no ARG"
                        : "a " + kind + " queue's put needs ARG");
            }
            switch (kind) {
                case "plain":
                    ((DistributedQueue<byte[]>) queue).put(item);
                    break;
                case "priority":
                    ((DistributedPriorityQueue<byte[]>) queue).put(item, Integer.parseInt(arg));
                    break;
                case "delay":
                    ((DistributedDelayQueue<byte[]>) queue).put(item, Long.parseLong(arg));
                    break;
                default:
                    ((DistributedIdQueue<byte[]>) queue).put(item, arg);
                    break;
            }
        }

        void close(String mode) throws Exception {
            if (consumer != null) {
                client.getConnectionStateListenable().removeListener(consumer);
            }
            queue.close();
        }
    }

    static final class SimpleQueueHandle extends Handle {
        final SimpleDistributedQueue queue;

        SimpleQueueHandle(String name, String path) {
            super(name);
            queue = new SimpleDistributedQueue(client, path);
        }

        void close(String mode) {
            // nothing to close: every call is a ZooKeeper round trip of its own
        }
    }

    // -- command helpers ----------------------------------------------------------------------

    static void need(String[] a, int min, int max, String usage) throws CommandError {
        if (a.length < min || a.length > max) {
            throw new CommandError("usage: " + usage);
        }
    }

    static String newName(String name) throws CommandError {
        if (!HANDLE.matcher(name).matches()) {
            throw new CommandError("bad handle name " + name + " (letters, digits, _ and - only)");
        }
        if (handles.containsKey(name)) {
            throw new CommandError("handle exists: " + name);
        }
        return name;
    }

    static <T extends Handle> T handle(String name, Class<T> type, String what)
            throws CommandError {
        Handle h = handles.get(name);
        if (h == null) {
            throw new CommandError("no handle " + name);
        }
        if (!type.isInstance(h)) {
            throw new CommandError(name + " is not " + what);
        }
        return type.cast(h);
    }

    /** Resolves NAME (mutex, semaphore, semmutex) or NAME.read / NAME.write (rwlock). */
    static final class Target {
        final LockHandle owner;
        final Lockish lock;

        Target(LockHandle owner, Lockish lock) {
            this.owner = owner;
            this.lock = lock;
        }
    }

    static Target lockTarget(String name) throws CommandError {
        int dot = name.lastIndexOf('.');
        String base = dot < 0 ? name : name.substring(0, dot);
        String part = dot < 0 ? "" : name.substring(dot + 1);
        Handle h = handles.get(base);
        if (!(h instanceof LockHandle)) {
            throw new CommandError(h == null ? "no handle " + base : base + " is not a lock");
        }
        LockHandle owner = (LockHandle) h;
        Lockish lock = owner.parts.get(part);
        if (lock == null) {
            throw new CommandError(owner.parts.containsKey("read")
                    ? "name a half of read-write lock " + base + ": " + base + ".read or "
                            + base + ".write"
                    : "no handle " + name);
        }
        return new Target(owner, lock);
    }

    /** All contenders of a read-write lock directory, readers and writers, in Curator's order
     *  (NAME.read / NAME.write participants are Curator's per-half lists, filtered by token). */
    static List<String> readWriteParticipants(String path) throws Exception {
        List<String> names = new ArrayList<>(client.getChildren().forPath(path));
        names.sort(Comparator.comparing((String n) -> StandardLockInternalsDriver.standardFixForSorting(
                StandardLockInternalsDriver.standardFixForSorting(n, "__READ__"), "__WRIT__")));
        List<String> paths = new ArrayList<>();
        for (String n : names) {
            paths.add(ZKPaths.makePath(path, n));
        }
        return paths;
    }

    static String hex(byte[] bytes) {
        StringBuilder sb = new StringBuilder();
        for (byte b : bytes) {
            sb.append(String.format("%02x", b & 0xff));
        }
        return sb.toString();
    }

    static byte[] unhex(String text) throws CommandError {
        if (text.length() % 2 != 0 || !text.matches("[0-9a-fA-F]*")) {
            throw new CommandError("not hex: " + text);
        }
        byte[] out = new byte[text.length() / 2];
        for (int i = 0; i < out.length; i++) {
            out[i] = (byte) Integer.parseInt(text.substring(2 * i, 2 * i + 2), 16);
        }
        return out;
    }

    static String atomic(AtomicValue<Long> v) {
        return v.succeeded() + " " + v.preValue() + " " + v.postValue();
    }

    static String participantsOf(Collection<Participant> participants) {
        List<String> out = new ArrayList<>();
        for (Participant p : participants) {
            out.add(p.getId() + ":" + p.isLeader());
        }
        return String.join(" ", out);
    }

    static String ok(String payload) {
        return payload == null || payload.isEmpty() ? "OK" : "OK " + payload;
    }

    // -- commands -----------------------------------------------------------------------------

    static String cycles(String[] a) throws Exception {
        need(a, 3, 4, "cycles PATH COUNT [WARMUP]");
        int count = Integer.parseInt(a[2]);
        int warmup = a.length > 3 ? Integer.parseInt(a[3]) : 0;
        if (count < 1 || warmup < 0) {
            throw new CommandError("COUNT must be at least 1 and WARMUP at least 0");
        }
        InterProcessMutex mutex = new InterProcessMutex(client, a[1]);
        for (int i = 0; i < warmup; i++) {
            mutex.acquire();
            mutex.release();
        }
        com.sun.management.OperatingSystemMXBean os =
                (com.sun.management.OperatingSystemMXBean)
                        java.lang.management.ManagementFactory.getOperatingSystemMXBean();
        long[] samples = new long[count];
        long cpu = os.getProcessCpuTime();
        for (int i = 0; i < count; i++) {
            long start = System.nanoTime();
            mutex.acquire();
            mutex.release();
            samples[i] = System.nanoTime() - start;
        }
        cpu = os.getProcessCpuTime() - cpu;
        StringBuilder reply = new StringBuilder("OK ").append(cpu);
        for (long sample : samples) {
            reply.append(' ').append(sample);
        }
        return reply.toString();
    }

    /** THREADS threads of this JVM, an InterProcessMutex each on PATH, cycling for MILLIS. */
    static String threads(String[] a) throws Exception {
        need(a, 4, 4, "threads PATH THREADS MILLIS");
        int n = Integer.parseInt(a[2]);
        long millis = Long.parseLong(a[3]);
        if (n < 1 || millis < 1) {
            throw new CommandError("THREADS and MILLIS must be at least 1");
        }
        java.util.concurrent.atomic.AtomicLong cycles = new java.util.concurrent.atomic.AtomicLong();
        java.util.concurrent.CountDownLatch go = new java.util.concurrent.CountDownLatch(1);
        java.util.concurrent.atomic.AtomicReference<Exception> failure =
                new java.util.concurrent.atomic.AtomicReference<>();
        long[] deadline = new long[1];
        Thread[] workers = new Thread[n];
        for (int i = 0; i < n; i++) {
            workers[i] = new Thread(() -> {
                InterProcessMutex mutex = new InterProcessMutex(client, a[1]);
                try {
                    go.await();
                    while (System.nanoTime() < deadline[0]) {
                        mutex.acquire();
                        mutex.release();
                        cycles.incrementAndGet();
                    }
                } catch (Exception e) {
                    failure.compareAndSet(null, e);
                }
            });
            workers[i].start();
        }
        com.sun.management.OperatingSystemMXBean os =
                (com.sun.management.OperatingSystemMXBean)
                        java.lang.management.ManagementFactory.getOperatingSystemMXBean();
        long cpu = os.getProcessCpuTime();
        long began = System.nanoTime();
        deadline[0] = began + millis * 1_000_000L;
        go.countDown();
        for (Thread worker : workers) {
            worker.join();
        }
        long elapsed = System.nanoTime() - began;
        cpu = os.getProcessCpuTime() - cpu;
        if (failure.get() != null) {
            throw failure.get();
        }
        return "OK " + cycles.get() + " " + elapsed + " " + cpu;
    }

    static String acquire(String[] a) throws Exception {
        need(a, 2, 4, "acquire NAME [TIMEOUTMS|-] [QTY]");
        String name = a[1];
        Target t = lockTarget(name);
        long timeoutMs = a.length < 3 || a[2].equals("-") ? -1 : Long.parseLong(a[2]);
        int qty = a.length < 4 ? 1 : Integer.parseInt(a[3]);
        if (qty < 1) {
            throw new CommandError("QTY must be at least 1");
        }
        if (timeoutMs < 0) {
            t.owner.worker.requireIdle();
            t.owner.worker.submit(() -> {
                try {
                    return "acquired " + t.lock.acquire(-1, qty);
                } catch (Exception e) {
                    return wasInterrupted(e) ? "cancelled" : "error " + describe(e);
                }
            }).thenAccept(outcome -> event(name, outcome));
            return "OK pending";
        }
        String held = t.owner.worker.call(() -> t.lock.acquire(timeoutMs, qty), timeoutMs + GRACE_MS);
        return held == null ? "OK timeout" : "OK acquired " + held;
    }

    static String release(String[] a) throws Exception {
        need(a, 2, 3, "release NAME [LEASEPATH]");
        Target t = lockTarget(a[1]);
        String leasePath = a.length > 2 ? a[2] : null;
        t.owner.worker.call(() -> {
            t.lock.release(leasePath);
            return null;
        }, GRACE_MS);
        return "OK";
    }

    static String participants(String[] a) throws Exception {
        need(a, 2, 2, "participants NAME");
        Handle h = handles.get(a[1]);
        if (h instanceof LatchHandle) {
            return ok(participantsOf(((LatchHandle) h).latch.getParticipants()));
        }
        if (h instanceof SelectorHandle) {
            return ok(participantsOf(((SelectorHandle) h).selector.getParticipants()));
        }
        if (h instanceof LockHandle && ((LockHandle) h).parts.containsKey("read")) {
            return ok(String.join(" ", readWriteParticipants(((LockHandle) h).path)));
        }
        return ok(String.join(" ", lockTarget(a[1]).lock.participants()));
    }

    static String hasLeadership(String[] a) throws Exception {
        need(a, 2, 2, "hasleadership NAME");
        Handle h = handles.get(a[1]);
        if (h instanceof LatchHandle) {
            return "OK " + ((LatchHandle) h).latch.hasLeadership();
        }
        if (h instanceof SelectorHandle) {
            return "OK " + ((SelectorHandle) h).selector.hasLeadership();
        }
        throw new CommandError(h == null ? "no handle " + a[1] : a[1] + " is not a latch or selector");
    }

    static String get(String[] a) throws Exception {
        need(a, 2, 2, "get NAME");
        Handle h = handles.get(a[1]);
        if (h instanceof CountHandle) {
            return "OK " + ((CountHandle) h).count.getCount();
        }
        if (h instanceof AtomicHandle) {
            AtomicValue<Long> v = ((AtomicHandle) h).value.get();
            if (!v.succeeded()) {
                throw new CommandError("get did not succeed");
            }
            return "OK " + v.postValue();
        }
        throw new CommandError(h == null ? "no handle " + a[1] : a[1] + " is not a counter");
    }

    static String set(String[] a) throws Exception {
        need(a, 3, 3, "set NAME VALUE");
        Handle h = handles.get(a[1]);
        if (h instanceof CountHandle) {
            ((CountHandle) h).count.setCount(Integer.parseInt(a[2]));
            return "OK";
        }
        if (h instanceof AtomicHandle) {
            ((AtomicHandle) h).value.forceSet(Long.parseLong(a[2]));
            return "OK";
        }
        throw new CommandError(h == null ? "no handle " + a[1] : a[1] + " is not a counter");
    }

    static String trySetCount(String[] a) throws Exception {
        need(a, 4, 4, "trysetcount NAME EXPECTED NEW");
        SharedCount count = handle(a[1], CountHandle.class, "a sharedcount").count;
        VersionedValue<Integer> current = count.getVersionedValue();
        if (current.getValue() != Integer.parseInt(a[2])) {
            return "OK false";
        }
        return "OK " + count.trySetCount(current, Integer.parseInt(a[3]));
    }

    static String close(String[] a) throws Exception {
        need(a, 2, 3, "close NAME [SILENT|NOTIFY_LEADER]");
        Handle h = handles.get(a[1]);
        if (h == null) {
            throw new CommandError("no handle " + a[1]);
        }
        String mode = a.length > 2 ? a[2] : null;
        if (mode != null && !(h instanceof LatchHandle)) {
            throw new CommandError("a close mode is only for latches");
        }
        if (mode != null && !mode.equals("SILENT") && !mode.equals("NOTIFY_LEADER")) {
            throw new CommandError("close mode must be SILENT or NOTIFY_LEADER");
        }
        handles.remove(a[1]);
        h.close(mode);
        return "OK";
    }

    static String dispatch(String[] a) throws Exception {
        switch (a[0]) {
            case "mutex": {
                need(a, 3, 3, "mutex NAME PATH");
                LockHandle h = new LockHandle(newName(a[1]), a[2]);
                h.parts.put("", new MutexLock(new InterProcessMutex(client, a[2])));
                handles.put(h.name, h);
                return "OK";
            }
            case "rwlock": {
                need(a, 3, 3, "rwlock NAME PATH");
                LockHandle h = new LockHandle(newName(a[1]), a[2]);
                InterProcessReadWriteLock rw = new InterProcessReadWriteLock(client, a[2]);
                h.parts.put("read", new MutexLock(rw.readLock()));
                h.parts.put("write", new MutexLock(rw.writeLock()));
                handles.put(h.name, h);
                return "OK";
            }
            case "semaphore": {
                need(a, 4, 4, "semaphore NAME PATH MAXLEASES");
                int max = Integer.parseInt(a[3]);
                LockHandle h = new LockHandle(newName(a[1]), a[2]);
                h.parts.put("", new SemaphoreLock(new InterProcessSemaphoreV2(client, a[2], max), a[2]));
                handles.put(h.name, h);
                return "OK";
            }
            case "semmutex": {
                need(a, 3, 3, "semmutex NAME PATH");
                LockHandle h = new LockHandle(newName(a[1]), a[2]);
                h.parts.put("", new SemMutexLock(new InterProcessSemaphoreMutex(client, a[2]), a[2]));
                handles.put(h.name, h);
                return "OK";
            }
            case "latch": {
                need(a, 3, 4, "latch NAME PATH [ID]");
                String name = newName(a[1]);
                handles.put(name, new LatchHandle(name, a[2], a.length > 3 ? a[3] : ""));
                return "OK";
            }
            case "selector": {
                need(a, 3, 4, "selector NAME PATH [ID]");
                String name = newName(a[1]);
                handles.put(name, new SelectorHandle(name, a[2], a.length > 3 ? a[3] : ""));
                return "OK";
            }
            case "sharedcount": {
                need(a, 4, 4, "sharedcount NAME PATH SEED");
                int seed = Integer.parseInt(a[3]);
                String name = newName(a[1]);
                handles.put(name, new CountHandle(name, a[2], seed));
                return "OK";
            }
            case "atomiclong": {
                need(a, 3, 3, "atomiclong NAME PATH");
                String name = newName(a[1]);
                handles.put(name, new AtomicHandle(name, a[2]));
                return "OK";
            }
            case "cache": {
                need(a, 3, 3, "cache NAME PATH");
                String name = newName(a[1]);
                handles.put(name, new CacheHandle(name, a[2]));
                return "OK";
            }
            case "cachedump": {
                need(a, 2, 2, "cachedump NAME");
                return ok(handle(a[1], CacheHandle.class, "a cache").dump());
            }
            case "discovery": {
                need(a, 3, 3, "discovery NAME BASEPATH");
                String name = newName(a[1]);
                handles.put(name, new DiscoveryHandle(name, a[2]));
                return "OK";
            }
            case "register": {
                need(a, 3, 3, "register NAME HEXJSON");
                DiscoveryHandle h = handle(a[1], DiscoveryHandle.class, "a discovery");
                h.discovery.registerService(h.serializer.deserialize(unhex(a[2])));
                return "OK";
            }
            case "update": {
                need(a, 3, 3, "update NAME HEXJSON");
                DiscoveryHandle h = handle(a[1], DiscoveryHandle.class, "a discovery");
                h.discovery.updateService(h.serializer.deserialize(unhex(a[2])));
                return "OK";
            }
            case "unregister": {
                need(a, 4, 4, "unregister NAME SERVICE ID");
                DiscoveryHandle h = handle(a[1], DiscoveryHandle.class, "a discovery");
                // Curator looks the registration up by id only; the rest is filler.
                h.discovery.unregisterService(new ServiceInstance<Object>(
                        a[2], a[3], null, null, null, null, 0L, ServiceType.DYNAMIC, null));
                return "OK";
            }
            case "query": {
                need(a, 3, 3, "query NAME SERVICE");
                DiscoveryHandle h = handle(a[1], DiscoveryHandle.class, "a discovery");
                return ok(h.hexInstances(h.discovery.queryForInstances(a[2])));
            }
            case "instance": {
                need(a, 4, 4, "instance NAME SERVICE ID");
                DiscoveryHandle h = handle(a[1], DiscoveryHandle.class, "a discovery");
                ServiceInstance<Object> found = h.discovery.queryForInstance(a[2], a[3]);
                return "OK " + (found == null ? "-" : hex(h.serializer.serialize(found)));
            }
            case "names": {
                need(a, 2, 2, "names NAME");
                DiscoveryHandle h = handle(a[1], DiscoveryHandle.class, "a discovery");
                List<String> names = new ArrayList<>(h.discovery.queryForNames());
                names.sort(null);
                return ok(String.join(" ", names));
            }
            case "reserialize": {
                need(a, 2, 2, "reserialize HEXJSON");
                JsonInstanceSerializer<Object> serializer = newSerializer();
                return ok(hex(serializer.serialize(serializer.deserialize(unhex(a[1])))));
            }
            case "servicecache": {
                need(a, 4, 4, "servicecache NAME DISCOVERY SERVICE");
                String name = newName(a[1]);
                DiscoveryHandle owner = handle(a[2], DiscoveryHandle.class, "a discovery");
                handles.put(name, new ServiceCacheHandle(name, owner, a[3]));
                return "OK";
            }
            case "cacheids": {
                need(a, 2, 2, "cacheids NAME");
                List<String> ids = new ArrayList<>();
                for (ServiceInstance<Object> instance
                        : handle(a[1], ServiceCacheHandle.class, "a servicecache").cache.getInstances()) {
                    ids.add(instance.getId());
                }
                ids.sort(null);
                return ok(String.join(" ", ids));
            }
            case "provider": {
                need(a, 5, 5, "provider NAME DISCOVERY SERVICE roundrobin|random|sticky");
                String name = newName(a[1]);
                DiscoveryHandle owner = handle(a[2], DiscoveryHandle.class, "a discovery");
                handles.put(name, new ProviderHandle(name, owner, a[3], a[4]));
                return "OK";
            }
            case "pick": {
                need(a, 2, 2, "pick NAME");
                ServiceInstance<Object> picked =
                        handle(a[1], ProviderHandle.class, "a provider").provider.getInstance();
                return "OK " + (picked == null ? "-" : picked.getId());
            }
            case "queue": {
                need(a, 4, 6, "queue NAME plain|priority|delay|id PATH [LOCKPATH|-] [noconsumer]");
                String lockPath = a.length > 4 && !a[4].equals("-") ? a[4] : null;
                boolean consume = true;
                if (a.length > 5) {
                    if (!a[5].equals("noconsumer")) {
                        throw new CommandError("the last argument of queue can only be noconsumer");
                    }
                    consume = false;
                }
                String name = newName(a[1]);
                handles.put(name, new QueueHandle(name, a[2], a[3], lockPath, consume));
                return "OK";
            }
            case "qput": {
                need(a, 3, 4, "qput NAME HEX [PRIORITY|DELAYUNTILMS|ID]");
                handle(a[1], QueueHandle.class, "a queue").put(itemBytes(a[2]), a.length > 3 ? a[3] : null);
                return "OK";
            }
            case "qputmulti": {
                need(a, 3, Integer.MAX_VALUE, "qputmulti NAME HEX [HEX ...]");
                QueueHandle h = handle(a[1], QueueHandle.class, "a queue");
                if (!h.kind.equals("plain")) {
                    throw new CommandError("qputmulti is for plain queues");
                }
                List<byte[]> items = new ArrayList<>();
                for (int i = 2; i < a.length; i++) {
                    items.add(itemBytes(a[i]));
                }
                Iterator<byte[]> next = items.iterator();
                ((DistributedQueue<byte[]>) h.queue).putMulti(() -> next.hasNext() ? next.next() : null);
                return "OK";
            }
            case "qremove": {
                need(a, 3, 3, "qremove NAME ID");
                QueueHandle h = handle(a[1], QueueHandle.class, "a queue");
                if (!h.kind.equals("id")) {
                    throw new CommandError("qremove is for id queues");
                }
                return "OK " + ((DistributedIdQueue<byte[]>) h.queue).remove(a[2]);
            }
            case "simple": {
                need(a, 3, 3, "simple NAME PATH");
                String name = newName(a[1]);
                handles.put(name, new SimpleQueueHandle(name, a[2]));
                return "OK";
            }
            case "soffer": {
                need(a, 3, 3, "soffer NAME HEX");
                handle(a[1], SimpleQueueHandle.class, "a simple queue").queue.offer(itemBytes(a[2]));
                return "OK";
            }
            case "stake": {
                need(a, 3, 3, "stake NAME TIMEOUTMS");
                SimpleDistributedQueue q = handle(a[1], SimpleQueueHandle.class, "a simple queue").queue;
                byte[] item = q.poll(Long.parseLong(a[2]), TimeUnit.MILLISECONDS);
                return item == null ? "OK -" : ok(hex(item));
            }
            case "cycles":
                return cycles(a);
            case "threads":
                return threads(a);
            case "acquire":
                return acquire(a);
            case "release":
                return release(a);
            case "cancel": {
                need(a, 2, 2, "cancel NAME");
                return lockTarget(a[1]).owner.worker.cancel() ? "OK cancelled" : "OK idle";
            }
            case "participants":
                return participants(a);
            case "isacquired": {
                need(a, 2, 2, "isacquired NAME");
                return "OK " + lockTarget(a[1]).lock.isAcquired();
            }
            case "hasleadership":
                return hasLeadership(a);
            case "ourpath": {
                need(a, 2, 2, "ourpath NAME");
                String path = handle(a[1], LatchHandle.class, "a latch").latch.getOurPath();
                return "OK " + (path == null ? "-" : path);
            }
            case "await": {
                need(a, 3, 3, "await NAME TIMEOUTMS");
                LeaderLatch latch = handle(a[1], LatchHandle.class, "a latch").latch;
                return "OK " + latch.await(Long.parseLong(a[2]), TimeUnit.MILLISECONDS);
            }
            case "yield": {
                need(a, 2, 2, "yield NAME");
                handle(a[1], SelectorHandle.class, "a selector").yieldLeadership();
                return "OK";
            }
            case "get":
                return get(a);
            case "set":
                return set(a);
            case "trysetcount":
                return trySetCount(a);
            case "versioned": {
                need(a, 2, 2, "versioned NAME");
                VersionedValue<Integer> v =
                        handle(a[1], CountHandle.class, "a sharedcount").count.getVersionedValue();
                return "OK " + v.getValue() + " " + v.getVersion();
            }
            case "add": {
                need(a, 3, 3, "add NAME DELTA");
                DistributedAtomicLong v = handle(a[1], AtomicHandle.class, "an atomiclong").value;
                return "OK " + atomic(v.add(Long.parseLong(a[2])));
            }
            case "cas": {
                need(a, 4, 4, "cas NAME EXPECTED NEW");
                DistributedAtomicLong v = handle(a[1], AtomicHandle.class, "an atomiclong").value;
                return "OK " + atomic(v.compareAndSet(Long.parseLong(a[2]), Long.parseLong(a[3])));
            }
            case "close":
                return close(a);
            case "getdata": {
                need(a, 2, 2, "getdata PATH");
                return ok(hex(client.getData().forPath(a[1])));
            }
            case "children": {
                need(a, 2, 2, "children PATH");
                List<String> names = new ArrayList<>(client.getChildren().forPath(a[1]));
                names.sort(null);
                return ok(String.join(" ", names));
            }
            case "session": {
                need(a, 1, 1, "session");
                long id = client.getZookeeperClient().getZooKeeper().getSessionId();
                return "OK " + Long.toHexString(id);
            }
            case "ping":
                return "OK";
            case "closeclient": {
                need(a, 1, 1, "closeclient");
                client.close();
                return "OK";
            }
            default:
                throw new CommandError("unknown command " + a[0]);
        }
    }

    /** Close the client (ending the session) within a bound, then stop the JVM at once. */
    static void shutdown(int status) {
        Thread closer = new Thread(() -> {
            try {
                client.close();
            } catch (Throwable ignored) {
                // exiting anyway
            }
        }, "peer-shutdown");
        closer.setDaemon(true);
        closer.start();
        try {
            closer.join(3000);
        } catch (InterruptedException ignored) {
            // exiting anyway
        }
        Runtime.getRuntime().halt(status);
    }

    public static void main(String[] args) throws Exception {
        protocol = new PrintStream(new FileOutputStream(FileDescriptor.out), false,
                StandardCharsets.UTF_8);
        System.setOut(System.err);
        if (args.length < 1 || args.length > 2) {
            emit("ERR usage: CuratorPeer <connectString> [sessionTimeoutMs]");
            Runtime.getRuntime().halt(2);
        }
        int sessionTimeoutMs = args.length > 1 ? Integer.parseInt(args[1]) : 4000;
        client = CuratorFrameworkFactory.builder()
                .connectString(args[0])
                .sessionTimeoutMs(sessionTimeoutMs)
                .connectionTimeoutMs(sessionTimeoutMs)
                .retryPolicy(new ExponentialBackoffRetry(100, 5))
                .build();
        client.getConnectionStateListenable().addListener(
                (c, state) -> event("@client", state.name()));
        client.start();
        if (!client.blockUntilConnected(30, TimeUnit.SECONDS)) {
            emit("ERR not connected to " + args[0] + " within 30 s");
            shutdown(2);
        }
        emit("READY");

        BufferedReader in = new BufferedReader(new InputStreamReader(System.in, StandardCharsets.UTF_8));
        String line;
        while ((line = in.readLine()) != null) {
            String[] a = line.trim().split("\\s+");
            if (a[0].equals("quit")) {
                emit("OK");
                break;
            }
            String reply;
            try {
                reply = a[0].isEmpty() ? "ERR empty command" : dispatch(a);
            } catch (Throwable t) {
                reply = "ERR " + describe(t);
            }
            emit(reply);
        }
        shutdown(0);
    }
}
